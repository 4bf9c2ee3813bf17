package dnsrtt

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/store"
)

// row is an answered UDP sample of target with a total of ms.
func row(target string, ms float64) store.Row {
	rtt := ms / 10
	probe := 10.0
	return store.Row{RunID: "r", Target: target, URL: "udp://" + target, Transport: "udp", Condition: "fresh", Status: "ok",
		TotalMs: &ms, TotalRTT: &rtt, ResolveRTT: &rtt, ProbeRTTMs: &probe}
}

// TestReportIsBoundedByConfiguration: what a hostile or huge store
// holds bounds nothing of the report's but its configuration. Past
// MaxCells, further resolvers' samples count in the pooled tables and
// nowhere apart; the per-resolver figure draws MaxResolverLines and the
// tables list MaxResolverRows of each transport and condition;
// non-finite durations are left out and counted; a cell of ±1e308 is
// drawn as a note, not a hang.
func TestReportIsBoundedByConfiguration(t *testing.T) {
	defer func(n int) { MaxCells = n }(MaxCells)
	MaxCells = 500
	var rows []store.Row
	for i := range 2000 {
		rows = append(rows, row(fmt.Sprintf("r%04d.example", i), float64(10+i%50)), row(fmt.Sprintf("r%04d.example", i), float64(11+i%50)))
	}
	inf, nan := math.Inf(1), math.NaN()
	bad := row("r0001.example", 1)
	bad.TotalMs = &inf
	worse := row("r0002.example", 1)
	worse.TotalRTT = &nan
	rows = append(rows, bad, worse)
	s := NewSamples(rows, nil)
	n, _ := s.Count()
	require.Equal(t, 4000, n, "every finite sample counts")
	require.Equal(t, 2, s.Skipped, "the non-finite ones are left out, counted")
	require.Equal(t, 3000, s.Folded, "the resolvers past the bound fold")
	require.LessOrEqual(t, len(s.Groups), MaxCells+1)
	require.Equal(t, 4000, s.Stats()[0].N, "the pooled table holds them all")
	require.Len(t, s.ByResolver(), 500)
	shown, left := s.shownResolvers()
	require.Len(t, shown, MaxResolverRows)
	require.Equal(t, 500-MaxResolverRows, left)
	_, top, all := s.mostMeasured(MaxResolverLines)
	require.Len(t, top, MaxResolverLines)
	require.Equal(t, 500, all)
	var out strings.Builder
	require.NoError(t, s.WriteTable(&out))
	require.Contains(t, out.String(), "2 samples left out")
	require.Contains(t, out.String(), "480 more rows past the 20 fastest")

	dir := t.TempDir()
	start := time.Now()
	sec, err := s.Section(dir)
	require.NoError(t, err)
	t.Logf("section of %d resolvers drawn in %v", len(s.targets()), time.Since(start).Round(time.Millisecond))
	require.Contains(t, string(sec.Intro), "3000 samples of resolvers past the report's bound of 500 cells")
	var of string
	for _, f := range sec.Figures {
		if f.Name == "cdf-total-by-resolver" {
			of = f.Of
		}
	}
	require.Contains(t, of, "the 12 most measured of the 500 resolvers held apart")

	// A cell of ±1e308: no axis spans it; the figure says so.
	huge := NewSamples([]store.Row{row("a.example", 1e308), row("a.example", -1e308), row("b.example", 0), row("b.example", 1)}, nil)
	hdir := t.TempDir()
	hs, err := huge.Section(hdir)
	require.NoError(t, err)
	for _, f := range hs.Figures {
		if f.Name == "cdf-total-by-resolver" {
			require.Contains(t, string(f.SVG), "too far apart to draw", "the panel says why it is empty")
		}
	}
	b, err := os.ReadFile(hdir + "/cdf-total-by-resolver.csv")
	require.NoError(t, err)
	require.Contains(t, string(b), "1e+308", "the values stay in the figure's data")
}

package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/stats"
)

// TestLittleChangeDiffersOnlyWhenSignificant: "DoH changes the load time
// of pages with many origins little" differs only where the change past
// 5 % is one Mann-Whitney tells from noise; within 5 % it holds.
func TestLittleChangeDiffersOnlyWhenSignificant(t *testing.T) {
	cell := func(page string, rel, p float64) pages.Cell {
		return pages.Cell{Profile: "fiber", Page: page, Transport: "doh2", H3: "1rtt", StubState: "warm", Engine: pages.EngineChromium,
			N: 5, OK: 5, Lookups: 20, LookupCounts: []float64{20, 20, 20, 20, 20}, RelPLT: rel,
			DeltaPLT: stats.Comparison{P: p, Base: stats.Summary{N: 5}}}
	}
	verdict := func(cells ...pages.Cell) experiment.Finding {
		fs := experiment.Earn(multiOriginFindings(cells), experiment.Evidence{})
		require.Len(t, fs, 2)
		return fs[1]
	}
	require.Equal(t, experiment.Holds, verdict(cell("o20", 3.9, 0.4), cell("o45", -4.8, 0.2)).Verdict)
	f := verdict(cell("o20", 3.9, 0.4), cell("o45", -9.5, 0.15))
	require.Equal(t, experiment.Inconclusive, f.Verdict, "-9.5 %% that Mann-Whitney cannot tell from noise")
	require.Contains(t, f.Reason, "the difference is not significant")
	require.Equal(t, experiment.Differs, verdict(cell("o20", 3.9, 0.4), cell("o45", -9.5, 0.008)).Verdict)
}

// TestOriginFinding: on one CDN with ORIGIN frames Chromium holds the
// claim when its loads make one lookup, fewer than without frames; the
// claim is absent without loads on one CDN, and the papers' claims read
// the papers' setup only.
func TestOriginFinding(t *testing.T) {
	cell := func(setup string, lookups, noLookup, plt float64) pages.Cell {
		return pages.Cell{Profile: "fiber", Page: "o20", Transport: "udp", H3: "1rtt", StubState: "cold", Engine: pages.EngineChromium,
			Setup: setup, N: 5, OK: 5, Lookups: lookups, NoLookup: noLookup, Conns: 2, PLT: plt, PLTs: []float64{plt - 2, plt - 1, plt, plt + 1, plt + 2}}
	}
	require.Empty(t, originFindings([]pages.Cell{cell("", 20, 0, 500)}))
	fs := originFindings([]pages.Cell{cell("cdn+origins", 2, 18, 465), cell("cdn", 20, 0, 518)})
	require.Len(t, fs, 1)
	require.Equal(t, experiment.Holds, fs[0].Verdict)
	require.Equal(t, "o20 fiber udp 1rtt: 18 of 20 origins with no lookup (90%), 2 connections, PLT 465 ms; without frames 20 lookups, 2 connections, PLT 518 ms (with frames -10.2 % (p=0.008 n=5+5))", fs[0].Here)
	require.Equal(t, experiment.Differs, originFindings([]pages.Cell{cell("cdn+origins", 20, 0, 518), cell("cdn", 20, 0, 518)})[0].Verdict,
		"frames Chromium ignores spare nothing")
	require.Empty(t, multiOriginFindings([]pages.Cell{cell("cdn+origins", 2, 18, 465)}), "not the papers' setup")
}

package compare

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// sample is an answered (or refused) DNS sample of target over udp.
func sample(target string, rep, round int, ms float64, rcode string) *measure.Sample {
	st := transport.StatusOK
	if rcode != "NOERROR" {
		st = transport.StatusRcode
	}
	return &measure.Sample{
		Task:    measure.Task{URL: "udp://" + target, Target: target, Transport: "udp", Condition: "fresh", Rep: rep, Round: round},
		Measure: &transport.Record{Status: st, Rcode: rcode, Timing: transport.Timing{TotalMs: ms}},
		Status:  st, Attempts: 1,
	}
}

// TestComparisonIsBenchmaths: two runs of two resolvers, one slower in
// the second: each row's p is benchmath's (stats.MannWhitneyP) on the
// same samples, refusals are counted, not timed; a run's rounds compare
// the same way.
func TestComparisonIsBenchmaths(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	values := map[string][]float64{}
	for _, run := range []string{"old", "new"} {
		r := store.NewRun("measure", "", map[string]any{"x": run})
		r.ID = run
		require.NoError(t, st.BeginRun(ctx, r))
		for _, target := range []string{"a.example", "b.example"} {
			for rep := range 12 {
				ms := 1 + rng.Float64()
				if run == "new" && target == "b.example" {
					ms += 0.5
				}
				values[run+target] = append(values[run+target], ms)
				require.NoError(t, st.Write(ctx, run, sample(target, rep, 0, ms, "NOERROR")))
			}
		}
		require.NoError(t, st.Write(ctx, run, sample("a.example", 99, 0, 0.01, "REFUSED")))
	}
	tab, err := Runs(ctx, measure.DefaultAnswers(), Source{Name: "old", Store: st, Filter: store.Filter{RunPrefix: "old"}}, Source{Name: "new", Store: st, Filter: store.Filter{RunPrefix: "new"}})
	require.NoError(t, err)
	require.Len(t, tab.Rows, 2)
	for _, row := range tab.Rows {
		want := stats.MannWhitneyP(values["old"+row.Target], values["new"+row.Target])
		require.InDelta(t, want, row.Columns[1].Versus.P, 1e-15, row.Target)
		require.False(t, row.Columns[1].Versus.Approx)
	}
	require.Equal(t, map[string]int{"REFUSED": 1}, tab.Rows[0].Columns[0].Failed)
	require.Equal(t, 13, tab.Rows[0].Columns[0].N)
	require.Equal(t, 12, tab.Rows[0].Columns[0].Ms.N, "the refusal is not timed")
	require.True(t, tab.Rows[1].Columns[1].Versus.Significant(), "b is 0.5 ms slower")
	var out strings.Builder
	require.NoError(t, tab.WriteTable(&out))
	require.Contains(t, out.String(), "A: old")
	require.Regexp(t, `b\.example\s+DoUDP\s+fresh\s+.*\+[0-9.]+ % \(p=`, out.String())
	cells := tab.Cells()
	require.Len(t, cells, 4)
	require.Equal(t, "old", cells[1].Baseline)

	// A campaign's rounds: a column per round.
	r := store.NewRun("campaign", "", map[string]any{"rounds": 3})
	r.ID = "rounds"
	require.NoError(t, st.BeginRun(ctx, r))
	for round := 1; round <= 3; round++ {
		for rep := range 8 {
			require.NoError(t, st.Write(ctx, "rounds", sample("a.example", rep, round, float64(round)+rng.Float64()/10, "NOERROR")))
		}
	}
	tab, err = Rounds(ctx, measure.DefaultAnswers(), Source{Name: "rounds", Store: st, Filter: store.Filter{RunPrefix: "rounds"}})
	require.NoError(t, err)
	require.Equal(t, []string{"round 1", "round 2", "round 3"}, tab.Names)
	require.Len(t, tab.Rows[0].Columns, 3)
	require.InDelta(t, 1.0, tab.Rows[0].Columns[1].Versus.Delta, 0.15, "round 2 about twice round 1")
	require.False(t, math.IsNaN(tab.Rows[0].Columns[2].Versus.P))
	_, err = Rounds(ctx, measure.DefaultAnswers(), Source{Name: "old", Store: st, Filter: store.Filter{RunPrefix: "old"}})
	require.ErrorContains(t, err, "rounds are compared in a campaign measured in rounds")
}

// TestPageLoadsCompare: campaigns' page loads of two runs, per page and
// DNS transport: PLT medians, the change and benchmath's p; failed loads
// counted by status, never timed.
func TestPageLoadsCompare(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	plts := map[string][]float64{}
	for _, run := range []string{"old", "new"} {
		r := store.NewRun(campaign.Kind, "", map[string]any{"x": run})
		r.ID = run
		require.NoError(t, st.BeginRun(ctx, r))
		for rep := range 10 {
			plt := 300 + 50*rng.Float64()
			if run == "new" {
				plt += 40
			}
			plts[run] = append(plts[run], plt)
			x := &campaign.PageLoad{Task: measure.Task{Target: "10.0.0.1", Transport: "doq", Page: "https://a.example/", Rep: rep}, Status: "ok", PLTMs: plt, Load: []byte("{}")}
			require.NoError(t, st.WriteResult(ctx, run, campaign.PageLoads, x.Key(), time.Now(), x))
		}
		x := &campaign.PageLoad{Task: measure.Task{Target: "10.0.0.1", Transport: "doq", Page: "https://a.example/", Rep: 99}, Status: "timeout", Load: []byte("{}")}
		require.NoError(t, st.WriteResult(ctx, run, campaign.PageLoads, x.Key(), time.Now(), x))
	}
	tab, err := PageLoads(ctx, Source{Name: "old", Store: st, Filter: store.Filter{RunPrefix: "old"}}, Source{Name: "new", Store: st, Filter: store.Filter{RunPrefix: "new"}})
	require.NoError(t, err)
	require.Len(t, tab.Rows, 1)
	row := tab.Rows[0]
	require.Equal(t, Cell{"https://a.example/", "doq", "wild"}, row.Cell)
	require.Equal(t, map[string]int{"timeout": 1}, row.Columns[0].Failed)
	require.Equal(t, 10, row.Columns[1].Ms.N)
	require.InDelta(t, stats.MannWhitneyP(plts["old"], plts["new"]), row.Columns[1].Versus.P, 1e-15)
	var out strings.Builder
	require.NoError(t, tab.WriteTable(&out))
	require.Contains(t, out.String(), "PLT, ms: medians of the loads that loaded")
	require.Equal(t, "compare-pages", tab.Cells()[1].Table)
}

// TestSectionOfManyCells: a comparison of more cells than the figure
// draws keeps every cell in its table, says which it drew, overlays the
// columns' CDFs with their data written beside them, and counts every
// sample, refused ones too.
func TestSectionOfManyCells(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	const targets = MaxPanels + 3
	for _, run := range []string{"old", "new"} {
		r := store.NewRun("measure", "", nil)
		r.ID = run
		require.NoError(t, st.BeginRun(ctx, r))
		for i := range targets {
			for rep := range 3 {
				require.NoError(t, st.Write(ctx, run, sample(fmt.Sprintf("r%02d.example", i), rep, 0, float64(1+rep), "NOERROR")))
			}
		}
		require.NoError(t, st.Write(ctx, run, sample("r00.example", 9, 0, 0, "REFUSED")))
	}
	tab, err := Runs(ctx, measure.DefaultAnswers(), Source{Name: "old", Store: st, Filter: store.Filter{RunPrefix: "old"}}, Source{Name: "new", Store: st, Filter: store.Filter{RunPrefix: "new"}})
	require.NoError(t, err)
	n, what := tab.Count()
	require.Equal(t, 2*(3*targets+1), n)
	require.Equal(t, "samples compared", what)

	dir := t.TempDir()
	sec, err := tab.Section(dir)
	require.NoError(t, err)
	require.Equal(t, "Run against run", sec.Title)
	require.Equal(t, targets, strings.Count(string(sec.Table), "<tr><td class=\"l\">r"), "every cell in the table")
	require.Contains(t, string(sec.Table), "REFUSED")
	require.Len(t, sec.Figures, 1)
	require.Contains(t, sec.Figures[0].Of, fmt.Sprintf("the first %d of %d cells", MaxPanels, targets))
	csv, err := os.ReadFile(filepath.Join(dir, "cdf-compare.csv"))
	require.NoError(t, err)
	require.Contains(t, string(csv), "r00.example,udp,fresh,old,")
	require.Contains(t, string(csv), "r00.example,udp,fresh,new,")
	require.NotContains(t, string(csv), fmt.Sprintf("r%02d.example", targets-1), "the cells past the figure's are in the table alone")
	for _, f := range []string{"cdf-compare.svg", "cdf-compare.pdf", "cdf-compare.png", "cdf-compare-1col.svg"} {
		require.FileExists(t, filepath.Join(dir, f))
	}
}

// TestColumnLetters: columns are named A to Z, then AA to AZ, BA, ...,
// ZZ, AAA, each once: a year's rounds (183) compared have 183 names
// of letters alone.
func TestColumnLetters(t *testing.T) {
	for i, want := range map[int]string{0: "A", 1: "B", 25: "Z", 26: "AA", 27: "AB", 51: "AZ", 52: "BA", 182: "GA", 701: "ZZ", 702: "AAA"} {
		require.Equal(t, want, columnLetter(i), "column %d", i)
	}
	seen := map[string]bool{}
	for i := range 20000 {
		l := columnLetter(i)
		require.False(t, seen[l], "%s twice", l)
		seen[l] = true
		for _, c := range l {
			require.True(t, c >= 'A' && c <= 'Z', "%d: %q", i, l)
		}
	}
	tb := &Table{Kind: DNS}
	for r := range 28 {
		tb.Names, tb.Wheres = append(tb.Names, fmt.Sprintf("round %d", r+1)), append(tb.Wheres, "the store")
	}
	var b strings.Builder
	require.NoError(t, tb.WriteTable(&b))
	require.Contains(t, b.String(), "Z: round 26 (the store)\nAA: round 27 (the store)\nAB: round 28 (the store)\n")
}

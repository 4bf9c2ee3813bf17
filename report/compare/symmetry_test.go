package compare

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// TestComparisonsAreSymmetric: two runs of random cells (some in one run
// only, some refused or failed, one of one run past the exact limit, so
// sketched):
// A against B and B against A have the same rows with the columns
// swapped, the same p, and relative changes that undo each other; a run
// against itself changes nothing and is never significant; every
// column counts the samples stored in its cell, by outcome; and taking
// REFUSED as an answer times the refusals it counted.
func TestComparisonsAreSymmetric(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	type count struct {
		n, timed int
		failed   map[string]int
	}
	counts := map[string]map[Cell]*count{}
	scheme := map[string]string{"udp": "udp", "tcp": "tcp", "dot": "tls"}
	for _, run := range []string{"a", "b"} {
		r := store.NewRun("measure", "", map[string]any{"run": run})
		r.ID = run
		require.NoError(t, st.BeginRun(ctx, r))
		counts[run] = map[Cell]*count{}
		for _, target := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
			for _, tr := range []string{"udp", "tcp", "dot"} {
				big := target == "192.0.2.1" && tr == "udp"
				if rng.IntN(5) == 0 && !big {
					continue // a cell this run does not have
				}
				k := Cell{target, tr, "fresh"}
				c := &count{failed: map[string]int{}}
				counts[run][k] = c
				n := 1 + rng.IntN(40)
				if big && run == "a" {
					n = stats.ExactLimit + 1000 // its answers sketched
				}
				scale := 1 + rng.Float64()
				for rep := range n {
					x := &measure.Sample{Task: measure.Task{URL: scheme[tr] + "://" + target, Target: target, Transport: tr, Condition: "fresh", Rep: rep},
						Status: transport.StatusOK, Attempts: 1,
						Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: scale * math.Exp(rng.NormFloat64())}}}
					switch f := rng.IntN(20); {
					case f == 0:
						x.Status, x.Measure.Status, x.Measure.Rcode = transport.StatusRcode, transport.StatusRcode, "REFUSED"
						c.failed["REFUSED"]++
					case f == 1:
						x.Status, x.Measure.Status, x.Measure.Rcode = transport.StatusTimeout, transport.StatusTimeout, ""
						x.Measure.Timing.TotalMs = 0
						c.failed[string(transport.StatusTimeout)]++
					default:
						c.timed++
					}
					c.n++
					require.NoError(t, st.Write(ctx, run, x))
				}
			}
		}
	}
	src := func(run string) Source { return Source{Name: run, Store: st, Filter: store.Filter{RunPrefix: run}} }
	ab, err := Runs(ctx, measure.DefaultAnswers(), src("a"), src("b"))
	require.NoError(t, err)
	ba, err := Runs(ctx, measure.DefaultAnswers(), src("b"), src("a"))
	require.NoError(t, err)
	require.Len(t, ba.Rows, len(ab.Rows))
	for i, row := range ab.Rows {
		back := ba.Rows[i]
		require.Equal(t, row.Cell, back.Cell, "the same rows in the same order")
		for j, run := range []string{"a", "b"} {
			c := counts[run][row.Cell]
			if c == nil {
				c = &count{failed: map[string]int{}}
			}
			col, other := row.Columns[j], back.Columns[1-j]
			require.Equal(t, c.n, col.N, "%v in %s", row.Cell, run)
			require.Equal(t, c.timed, col.Ms.N, "%v in %s: the answered timed", row.Cell, run)
			require.Equal(t, c.failed, col.Failed, "%v in %s", row.Cell, run)
			require.Equal(t, fmt.Sprint(col.Ms), fmt.Sprint(other.Ms), "%v in %s: the same column either way", row.Cell, run)
		}
		v, w := row.Columns[1].Versus, back.Columns[1].Versus
		if math.IsNaN(v.P) {
			require.True(t, math.IsNaN(w.P), "%v", row.Cell)
			continue
		}
		require.InDelta(t, v.P, w.P, 1e-12, "%v: the test is symmetric", row.Cell)
		require.Equal(t, v.Approx, w.Approx, "%v", row.Cell)
		require.Equal(t, v.Significant(), w.Significant(), "%v", row.Cell)
		require.InDelta(t, 1, (1+v.Delta)*(1+w.Delta), 1e-9, "%v: the changes undo each other", row.Cell)
		if row.Cell.Target == "192.0.2.1" && row.Cell.Transport == "udp" {
			require.True(t, v.Approx, "a cell past the exact limit is compared binned")
		}
	}

	aa, err := Runs(ctx, measure.DefaultAnswers(), src("a"), src("a"))
	require.NoError(t, err)
	for _, row := range aa.Rows {
		v := row.Columns[1].Versus
		if row.Columns[0].Ms.N == 0 {
			continue
		}
		require.Zero(t, v.Delta, "%v against itself", row.Cell)
		require.InDelta(t, 1, v.P, 1e-9, "%v against itself", row.Cell)
		require.False(t, v.Significant(), "%v against itself", row.Cell)
	}

	answers, err := measure.ParseAnswers([]string{"NOERROR", "REFUSED"})
	require.NoError(t, err)
	refusedOK, err := Runs(ctx, answers, src("a"), src("b"))
	require.NoError(t, err)
	for i, row := range refusedOK.Rows {
		for j := range row.Columns {
			was := ab.Rows[i].Columns[j]
			require.Equal(t, was.N, row.Columns[j].N, "%v", row.Cell)
			require.Equal(t, was.Ms.N+was.Failed["REFUSED"], row.Columns[j].Ms.N, "%v: the refusals timed", row.Cell)
			require.Zero(t, row.Columns[j].Failed["REFUSED"], "%v", row.Cell)
		}
	}
}

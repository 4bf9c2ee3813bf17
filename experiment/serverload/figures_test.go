package serverload

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/stats"
)

// figureRows reads the CSV the set's figure named name wrote.
func figureRows(t *testing.T, set *figure.Set, name string) [][]string {
	t.Helper()
	for _, f := range set.Figures {
		if f.Name != name {
			continue
		}
		r, err := os.Open(filepath.Join(set.Dir, f.CSV))
		require.NoError(t, err)
		defer r.Close()
		rows, err := csv.NewReader(r).ReadAll()
		require.NoError(t, err)
		return rows
	}
	t.Fatalf("no figure %s among %d", name, len(set.Figures))
	return nil
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return v
}

// openLoop is an open-loop benchmark at qps of 1.2 s of sending, in
// windows of 100 ms: window i answered i+1 queries, i of latency i+1 ms
// and its slowest of 100 ms; the fourth failed two.
func openLoop(qps float64) *bench.Stored {
	s := &bench.Stored{Run: "server-load-20261201T120000Z-x"}
	s.Label, s.Protocol, s.Mode, s.Step, s.IntendedQPS = "udp", "udp", "open-loop", -1, qps
	s.ElapsedS = 1.5 // the wait for the last answers: not a window of sending
	agg := &bench.Aggregate{Latency: stats.NewDist(), Window: 100 * time.Millisecond, LastAt: 1150 * time.Millisecond}
	for i := range 12 {
		w := bench.Window{Latency: stats.NewDist(), Answered: i + 1}
		for j := range i + 1 {
			v := float64(i + 1)
			if j == i {
				v = 100
			}
			w.Latency.Add(v)
			agg.Latency.Add(v)
		}
		if i == 3 {
			w.Failed = 2
		}
		agg.Windows = append(agg.Windows, w)
	}
	s.Agg = agg
	return s
}

// TestTimeFiguresSayEachWindow: the over-time figures' data are a row
// per window of intended send times: its start, the p50, p90 and max of
// what it answered, its answers per second over the time it covered, and
// what failed; the last window ends with the sending (the last send and
// one gap), not the wait for the last answers.
func TestTimeFiguresSayEachWindow(t *testing.T) {
	set := &figure.Set{Dir: t.TempDir()}
	require.NoError(t, timeFigures(set, []*bench.Stored{openLoop(20)}))
	rows := figureRows(t, set, "server-load-latency")
	require.Equal(t, []string{"run", "benchmark", "window start s", "p50 ms", "p90 ms", "max ms", "answered qps", "failed"}, rows[0])
	require.Len(t, rows, 1+12)
	for i, r := range rows[1:] {
		require.InDelta(t, 0.1*float64(i), num(t, r[2]), 1e-9, "window %d starts", i)
		require.InDelta(t, 100, num(t, r[5]), 1e-9, "window %d: the max is its slowest", i)
		if i >= 2 {
			require.InDelta(t, float64(i+1), num(t, r[3]), 1e-9, "window %d: the median", i)
		}
		want := float64(i+1) / 0.1
		if i == 11 { // 1.1 s to the last send at 1.15 s and a gap of 50 ms: 0.1 s
			want = 12 / 0.1
		}
		require.InDelta(t, want, num(t, r[6]), 1e-6, "window %d: answers per second", i)
		failed := "0"
		if i == 3 {
			failed = "2"
		}
		require.Equal(t, failed, r[7])
	}
	require.Equal(t, rows, figureRows(t, set, "server-load-throughput"), "the throughput figure draws the same windows")

	// A last window the sending barely entered says nothing of a rate.
	b := openLoop(20)
	b.Agg.LastAt = 1055 * time.Millisecond // and a gap of 50 ms: 5 ms into the last window
	set = &figure.Set{Dir: t.TempDir()}
	require.NoError(t, timeFigures(set, []*bench.Stored{b}))
	require.Len(t, figureRows(t, set, "server-load-latency"), 1+11, "the sliver is left out")
}

// TestSpectrumFromTheFirstToTheLastSample: the percentile spectrum runs
// from the fastest answer (0 %) to the slowest (the last percentile the
// samples reach), its latency never falling as the percentile grows.
func TestSpectrumFromTheFirstToTheLastSample(t *testing.T) {
	set := &figure.Set{Dir: t.TempDir()}
	b := openLoop(20)
	require.NoError(t, spectrumFigure(set, []*bench.Stored{b}))
	rows := figureRows(t, set, "server-load-spectrum")
	require.Equal(t, []string{"run", "benchmark", "percentile", "latency ms"}, rows[0])
	require.Len(t, rows, 1+201)
	require.Equal(t, "0", rows[1][2])
	require.Equal(t, "2", rows[1][3], "the fastest answer")
	last := rows[len(rows)-1]
	n := float64(b.Agg.Latency.N())
	require.InDelta(t, 100*(1-1/n), num(t, last[2]), 1e-9, "the last percentile n samples reach")
	require.Equal(t, "100", last[3], "the slowest answer")
	for i := 2; i < len(rows); i++ {
		require.GreaterOrEqual(t, num(t, rows[i][2]), num(t, rows[i-1][2]))
		require.GreaterOrEqual(t, num(t, rows[i][3]), num(t, rows[i-1][3]), "row %d", i)
	}
}

package serverload

import (
	"context"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
)

// TestServerLoad steps two transports through three rates on loopback:
// every query is stored, each step says whether it held, and the
// section draws its four figures from the stored samples, folded as
// they are read.
func TestServerLoad(t *testing.T) {
	c := &ServerLoad{Transports: []string{"udp", "doq"}, Start: 200, Limit: 800, Step: 400 * time.Millisecond, P99: 2 * time.Second,
		Env: experiment.Env{Store: filepath.Join(t.TempDir(), "load.db")}}
	res, err := experiment.RunAndLoad(context.Background(), c)
	require.NoError(t, err)
	bs := res.(Benches)
	require.Len(t, bs, 2*3)
	for i, b := range bs {
		require.Equal(t, []string{"udp", "doq"}[i/3], b.Label)
		require.Equal(t, i%3, b.Step)
		require.Equal(t, []float64{200, 400, 800}[i%3], b.IntendedQPS)
		require.True(t, b.Held, "%s: a 2 s bound holds on loopback", b.Name())
		require.Equal(t, b.Sent, b.Summary.Answered, b.Name())
		// Every stored query is in the aggregate the figures draw, each in
		// one window of its send time.
		require.Equal(t, b.Sent, b.Agg.Latency.N(), b.Name())
		inWindows := 0
		for _, w := range b.Agg.Windows {
			inWindows += w.Answered + w.Failed
		}
		require.Equal(t, b.Sent, inWindows, b.Name())
	}
	sec, err := res.Section(t.TempDir())
	require.NoError(t, err)
	var names []string
	for _, f := range sec.Figures {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"server-load-rate", "server-load-latency", "server-load-throughput", "server-load-spectrum"}, names)
	require.Contains(t, string(sec.Table), "doq @800/s")
}

// TestPick: per stepped series the highest rate held and the first not
// held; single runs always.
func TestPick(t *testing.T) {
	b := func(run, label string, step int, held bool) *bench.Stored {
		s := &bench.Stored{Run: run}
		s.Label, s.Step, s.Held = label, step, held
		return s
	}
	bs := Benches{b("r1", "udp", 0, true), b("r1", "udp", 1, true), b("r1", "udp", 2, false), b("r1", "udp", 3, false),
		b("r1", "doq", 0, false), b("r2", "tcp", -1, false)}
	got := pick(bs, 12)
	require.Equal(t, []*bench.Stored{bs[1], bs[2], bs[4], bs[5]}, got)
	require.Len(t, pick(bs, 2), 2)
	require.Equal(t, "18:39:22", shortRun("server-load-20261123T183922Z-13c7d27e5121a1f8-loopback"))
}

// TestRunRefusesABadDesign: an unknown transport, or a limit below the
// start, is refused before anything is measured or stored.
func TestRunRefusesABadDesign(t *testing.T) {
	path := filepath.Join(t.TempDir(), "load.db")
	_, err := (&ServerLoad{Transports: []string{"udp", "smoke-signals"}, Env: experiment.Env{Store: path}}).Run(context.Background())
	require.ErrorContains(t, err, `transport "smoke-signals" is not one of`)
	_, err = (&ServerLoad{Start: 4000, Limit: 1000, Env: experiment.Env{Store: path}}).Run(context.Background())
	require.ErrorContains(t, err, "--limit 1000 is below --start 4000")
	for _, c := range []struct {
		load func(*ServerLoad)
		want string
	}{
		{func(l *ServerLoad) { l.Limit = math.Inf(1) }, "--limit +Inf is not a rate"}, // doubled without end
		{func(l *ServerLoad) { l.Start = math.NaN() }, "--start NaN is not a rate"},
		{func(l *ServerLoad) { l.MaxLoss = math.NaN() }, "--max-loss NaN: want a share"},
		{func(l *ServerLoad) { l.MaxLoss = 1 }, "--max-loss 1: want a share"},
		{func(l *ServerLoad) { l.Start, l.Limit = 1e-9, 64000 }, "doubles 45 times up to --limit 64000, more than 24 rates"},
	} {
		l := &ServerLoad{Env: experiment.Env{Store: path}}
		c.load(l)
		_, err = l.Run(context.Background())
		require.ErrorContains(t, err, c.want)
	}
	require.NoFileExists(t, path, "nothing stored")
}

// TestWindowHoldsFiftyAnswers: the over-time figures' step is a fiftieth
// of the run, at least 10 ms and long enough for 50 answers at the rate
// answered, at most a second.
func TestWindowHoldsFiftyAnswers(t *testing.T) {
	require.Equal(t, 100*time.Millisecond, window(5*time.Second, 64000), "a fiftieth of 5 s")
	require.Equal(t, 10*time.Millisecond, window(100*time.Millisecond, 1e6), "never under 10 ms")
	require.Equal(t, 500*time.Millisecond, window(5*time.Second, 100), "50 answers at 100/s")
	require.Equal(t, time.Second, window(5*time.Second, 10), "at most a second")
	require.Equal(t, 100*time.Millisecond, window(5*time.Second, 0), "no answers: a fiftieth")
}

// TestSummaryRows: a row per benchmark in the order they ran, the queries
// lost those sent and not answered, unsent those due and never sent,
// "held" only for stepped runs; the
// text table names each run once, before its rows.
func TestSummaryRows(t *testing.T) {
	b := func(run, label string, step int, sent, answered int, bound bool) *bench.Stored {
		s := &bench.Stored{Run: run}
		s.Label, s.Step, s.Sent, s.Summary.Answered, s.IntendedQPS = label, step, sent, answered, 1000
		if bound {
			s.Bound, s.Held = &bench.Bound{P99: time.Second}, sent == answered
		}
		return s
	}
	bs := Benches{b("r1", "udp", 0, 1000, 1000, true), b("r1", "udp", 1, 2000, 1990, true), b("r2", "tcp", -1, 500, 500, false)}
	bs[1].Unsent = 37
	rows := Summarize(bs)
	require.Len(t, rows, 3)
	require.Equal(t, 0, rows[0].Lost)
	require.Equal(t, "yes", rows[0].Held)
	require.Equal(t, 10, rows[1].Lost)
	require.Equal(t, 37, rows[1].Unsent, "due, never sent: apart from the lost")
	require.Equal(t, "no", rows[1].Held)
	require.Equal(t, "", rows[2].Held, "a single run holds no bound")
	var out strings.Builder
	require.NoError(t, bs.WriteTable(&out))
	require.Equal(t, 1, strings.Count(out.String(), "run r1\n"))
	require.Less(t, strings.Index(out.String(), "run r1"), strings.Index(out.String(), "run r2"))
	require.Regexp(t, `\s1000\s+0\s+0\s+10\s+37\s`, out.String(), "intended, achieved, answered, lost, then unsent")
}

// TestRateFigureDrawsSteppedOpenLoopRuns: the rate figure's data are the
// steps of open-loop stepped runs, each with its intended and answered
// rate, p99 and whether it held; single runs and closed-loop runs
// (whose rate is the server's, not intended) are not on it, and
// without a stepped open-loop run there is no figure.
func TestRateFigureDrawsSteppedOpenLoopRuns(t *testing.T) {
	b := func(label, mode string, step int, qps, answered, p99 float64, held bool) *bench.Stored {
		s := &bench.Stored{Run: "server-load-20261129T120000Z-x"}
		s.Label, s.Protocol, s.Mode, s.Step, s.IntendedQPS, s.AnsweredQPS, s.Held = label, label, mode, step, qps, answered, held
		s.Latency.P = map[string]float64{"99": p99}
		if step >= 0 {
			s.Bound = &bench.Bound{P99: 50 * time.Millisecond}
		}
		return s
	}
	bs := Benches{
		b("udp", "open-loop", 0, 1000, 1000, 0.4, true), b("udp", "open-loop", 1, 2000, 2000, 0.6, true), b("udp", "open-loop", 2, 4000, 3100, 80, false),
		b("doq", "open-loop", -1, 500, 500, 1.2, false),
		b("tcp", "closed-loop", 0, 0, 9000, 2, true),
	}
	dir := t.TempDir()
	set := &figure.Set{Dir: dir}
	require.NoError(t, rateFigure(set, bs))
	require.Len(t, set.Figures, 1)
	f, err := os.Open(filepath.Join(dir, set.Figures[0].CSV))
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"run", "benchmark", "intended qps", "answered qps", "p99 ms", "held"},
		{"server-load-20261129T120000Z-x", "udp", "1000", "1000", "0.4", "true"},
		{"server-load-20261129T120000Z-x", "udp", "2000", "2000", "0.6", "true"},
		{"server-load-20261129T120000Z-x", "udp", "4000", "3100", "80", "false"},
	}, rows)

	none := &figure.Set{Dir: t.TempDir()}
	require.NoError(t, rateFigure(none, bs[3:]))
	require.Empty(t, none.Figures)
}

// TestPanelTitlesSayWhatBroke: a stepped benchmark is named with its
// rate, and one that broke its bound says so; the run's start names it
// when a figure draws several runs, and an ID without one is itself.
func TestPanelTitlesSayWhatBroke(t *testing.T) {
	b := func(run string, step int, rate float64, bound, held bool) *bench.Stored {
		s := &bench.Stored{Run: run}
		s.Label, s.Step, s.Mode, s.IntendedQPS, s.Held = "doq", step, "open-loop", rate, held
		if bound {
			s.Bound = &bench.Bound{P99: 100 * time.Millisecond}
		}
		return s
	}
	const r1, r2 = "server-load-20261123T183922Z-13c7d27e5121a1f8-loopback", "server-load-20261124T070501Z-aa-loopback"
	held, broke, single := b(r1, 2, 4000, true, true), b(r1, 3, 8000, true, false), b(r2, -1, 2000, false, false)
	require.Equal(t, "doq @4k/s", title(held, false))
	require.Equal(t, "doq @8k/s (not held)", title(broke, false))
	require.Equal(t, "doq", title(single, false), "a single run: no rate, and no bound to break")
	require.False(t, manyRuns([]*bench.Stored{held, broke}))
	require.True(t, manyRuns([]*bench.Stored{held, single}))
	require.Equal(t, "07:05:01 doq", title(single, true))
	require.Equal(t, "a-run-without-a-time", shortRun("a-run-without-a-time"))
}

package bench_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// benchRun is a new store with a bench run begun in it, closed when the
// test ends.
func benchRun(t *testing.T) (*store.Store, store.Run) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	run := store.NewRun("bench", "", nil)
	require.NoError(t, st.BeginRun(context.Background(), run))
	return st, run
}

// TestStoreKeepsEveryQuery: a run's queries go into the store whole,
// across several chunks, and come back as they were, statuses and
// connection facts included.
func TestStoreKeepsEveryQuery(t *testing.T) {
	ctx := context.Background()
	st, run := benchRun(t)

	n := 2*bench.ChunkSize + 7
	samples := make([]bench.Sample, n)
	for i := range samples {
		s := bench.Sample{At: time.Duration(i) * 20 * time.Microsecond, Latency: time.Duration(100+i%977) * time.Microsecond,
			Service: time.Duration(90+i%977) * time.Microsecond, Status: transport.StatusOK}
		switch {
		case i%1000 == 0:
			s.Status = transport.StatusTimeout
		case i%10 == 3:
			s.Handshake, s.Resumed, s.ZeroRTT = 2*time.Millisecond, true, i%20 == 3
		}
		samples[i] = s
	}
	rec := bench.Record{Key: "0", Label: "udp", Protocol: "udp", Policy: "reuse", Conns: 1, Step: -1, Start: time.Now(),
		Summary: bench.Summary{Mode: "open-loop", Sent: n}}
	require.NoError(t, bench.Save(ctx, st, run.ID, rec, samples))

	got, err := bench.Load(ctx, st, func(string) bool { return true })
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, run.ID, got[0].Run)
	require.Equal(t, "udp", got[0].Label)
	require.Equal(t, n, got[0].Sent)
	require.Equal(t, samples, got[0].Samples)

	// Exported as a table, a row per query, streamed chunk by chunk.
	i := slices.IndexFunc(store.Exports(), func(e store.Export) bool { return e.Table == "bench" })
	require.GreaterOrEqual(t, i, 0, "bench registers its table")
	var out bytes.Buffer
	rows, err := store.Exports()[i].Write(ctx, st, func(string) bool { return true }, &out, store.Parquet)
	require.NoError(t, err)
	require.Equal(t, n, rows)
	back, err := parquet.Read[bench.Row](bytes.NewReader(out.Bytes()), int64(out.Len()))
	require.NoError(t, err)
	require.Len(t, back, n)
	x := back[1003]
	require.Equal(t, bench.Row{RunID: run.ID, Key: "0", Label: "udp", Protocol: "udp", Policy: "reuse", Conns: 1, Step: -1, Mode: "open-loop",
		AtMs: 20.06, LatencyMs: 0.126, ServiceMs: 0.116, HandshakeMs: 2, Status: "ok", Resumed: true, ZeroRTT: true}, x)
	require.Equal(t, "timeout", back[1000].Status)
}

// TestRunKeepsSamples: with Keep, a run against doxlab's server has one
// sample per query sent, each answered, at its intended send time.
func TestRunKeepsSamples(t *testing.T) {
	url := serve(t, "udp", server.Faults{})
	var reports []bench.Progress
	res, err := bench.Run(context.Background(), bench.Config{URL: url, Rate: 400, Duration: 1500 * time.Millisecond,
		Keep: true, Progress: func(p bench.Progress) { reports = append(reports, p) }, ProgressEvery: 500 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 600, res.Sent)
	require.Len(t, res.Samples, 600)
	require.Equal(t, "udp", res.Protocol)
	seen := map[time.Duration]bool{}
	for _, s := range res.Samples {
		require.Equal(t, transport.StatusOK, s.Status)
		require.Zero(t, s.At%(2500*time.Microsecond), "intended send times are on the 400/s schedule")
		require.False(t, seen[s.At])
		seen[s.At] = true
		require.GreaterOrEqual(t, s.Latency, s.Service)
	}
	// Kept samples give exact percentiles, the ones numpy computes on
	// the export (internal/stats), not the histogram's 3 digits.
	sum := res.Summarize()
	require.True(t, sum.Latency.Exact)
	var lat []float64
	for _, s := range res.Samples {
		lat = append(lat, float64(s.Latency)/float64(time.Millisecond))
	}
	slices.Sort(lat)
	require.Equal(t, stats.Quantile(lat, 0.5), sum.Latency.P["50"])
	require.Equal(t, stats.Quantile(lat, 0.99), sum.Latency.P["99"])
	require.NotEmpty(t, reports, "progress while it sends")
	last := reports[len(reports)-1]
	require.Positive(t, last.OK)
	require.LessOrEqual(t, last.OK, last.Sent)
}

// TestAggregateCountsTheRunsAnswers: the report's windows take the
// rcodes the run took as answers (its summary's), so a run that counted
// REFUSED as answered draws it as answered too; a run without any
// (older records) takes NOERROR and NXDOMAIN.
func TestAggregateCountsTheRunsAnswers(t *testing.T) {
	ctx := context.Background()
	st, run := benchRun(t)
	samples := []bench.Sample{
		{At: 0, Latency: time.Millisecond, Status: transport.StatusOK, Rcode: "NOERROR"},
		{At: time.Millisecond, Latency: 2 * time.Millisecond, Status: transport.StatusRcode, Rcode: "REFUSED"},
		{At: 2 * time.Millisecond, Latency: 3 * time.Millisecond, Status: transport.StatusTimeout},
	}
	for key, ok := range map[string][]string{"refused-too": {"NOERROR", "REFUSED"}, "old": nil} {
		rec := bench.Record{Key: key, Label: "udp", Protocol: "udp", Step: -1, Start: time.Now(), Summary: bench.Summary{Mode: "open-loop", Sent: 3, OKRcodes: ok}}
		require.NoError(t, bench.Save(ctx, st, run.ID, rec, samples))
	}
	got, err := bench.LoadAggregated(ctx, st, func(string) bool { return true }, func(bench.Record) time.Duration { return time.Second })
	require.NoError(t, err)
	require.Len(t, got, 2)
	for _, s := range got {
		w := s.Agg.Windows[0]
		if s.Key == "refused-too" {
			require.Equal(t, 2, w.Answered, "REFUSED taken as the run took it")
			require.Equal(t, 1, w.Failed)
			require.Equal(t, 2, s.Agg.Latency.N())
		} else {
			require.Equal(t, 1, w.Answered, "the defaults")
			require.Equal(t, 2, w.Failed)
		}
	}
}

// TestDamagedQueriesAreRefused: a stored benchmark whose queries lie
// far outside it (a damaged store, or one written by something else)
// is refused with what is wrong, before its windows are made: a query
// a hundred days past a one-second benchmark once had the aggregate
// make a window for every 10 ms up to it, 860 million of them.
func TestDamagedQueriesAreRefused(t *testing.T) {
	ctx := context.Background()
	window := func(bench.Record) time.Duration { return 10 * time.Millisecond }
	for _, at := range []time.Duration{100 * 24 * time.Hour, -time.Second} {
		st, run := benchRun(t)
		samples := []bench.Sample{{At: 0, Latency: time.Millisecond, Status: transport.StatusOK},
			{At: at, Latency: time.Millisecond, Status: transport.StatusOK}}
		rec := bench.Record{Key: "0", Label: "udp", Protocol: "udp", Policy: "reuse", Conns: 1, Step: -1, Start: time.Now(),
			Summary: bench.Summary{Mode: "open-loop", Sent: 2, ElapsedS: 1}}
		require.NoError(t, bench.Save(ctx, st, run.ID, rec, samples))
		_, err := bench.LoadAggregated(ctx, st, func(string) bool { return true }, window)
		require.ErrorIs(t, err, bench.ErrDamaged, "a query at %v", at)
		require.ErrorContains(t, err, "outside the benchmark's 1.0 s")
		require.ErrorContains(t, err, run.ID)
	}
	// One a little past its end, as the last sends of a run are, is read.
	st, run := benchRun(t)
	rec := bench.Record{Key: "0", Label: "udp", Protocol: "udp", Policy: "reuse", Conns: 1, Step: -1, Start: time.Now(),
		Summary: bench.Summary{Mode: "open-loop", Sent: 1, ElapsedS: 1}}
	require.NoError(t, bench.Save(ctx, st, run.ID, rec, []bench.Sample{{At: 1100 * time.Millisecond, Latency: time.Millisecond, Status: transport.StatusOK}}))
	got, err := bench.LoadAggregated(ctx, st, func(string) bool { return true }, window)
	require.NoError(t, err)
	require.Len(t, got[0].Agg.Windows, 111)
	require.Equal(t, 1, got[0].Agg.Windows[110].Answered)
}

// TestRecordOfAnUnansweredRun: a run that has no record of any query
// (stopped before its first: an interrupt at its start, a stepped run
// cut short) is stored named by the protocol its queries would have been
// sent in, as its records would have named it (dot, doh1, doh3), not by
// its URL's scheme (tls, https, quic). Nothing is sent: the context is
// cancelled first.
func TestRecordOfAnUnansweredRun(t *testing.T) {
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		url, version, want string
	}{
		{"tls://127.0.0.1:1", "", "dot"}, {"quic://127.0.0.1:1", "", "doq"}, {"udp://127.0.0.1:1", "", "udp"},
		{"https://127.0.0.1:1/dns-query", "1.1", "doh1"}, {"https://127.0.0.1:1/dns-query", "", "doh2"},
		{"https://127.0.0.1:1/dns-query", "3", "doh3"}, {"h3://127.0.0.1:1/dns-query", "", "doh3"},
	} {
		cfg := bench.Config{URL: c.url, Duration: 100 * time.Millisecond, MaxQueries: 3, Options: transport.Options{HTTPVersion: c.version, Timeout: 200 * time.Millisecond, Insecure: true}}
		res, err := bench.Run(stopped, cfg)
		require.NoError(t, err, c.url)
		require.Empty(t, res.Protocol, "%s: no record", c.url)
		rec := bench.NewRecord("1", cfg, res, -1)
		require.Equal(t, c.want, rec.Protocol, "%s over HTTP %q", c.url, c.version)
		require.Equal(t, c.want, rec.Label, c.url)
	}
}

package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// summaries: a run's summary is kept and read back by its kind, replaced
// in place; what the store holds of a run moves with a sample added;
// archiving a run's samples takes its summaries with them; a summary of
// a run the store does not hold is refused.
func summaries(t *testing.T, dsn string) {
	ctx := context.Background()
	s, run, samples := openFixture(t, dsn)
	held, err := s.RunSamples(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{run.ID: 3}, held)
	h, err := s.RunHeld(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), h.Samples, "one run's count is the pass over all of them")

	for _, data := range []string{"first", "second"} {
		require.NoError(t, s.PutSummary(ctx, "cells 1", run.ID, store.Summary{Held: h, Data: []byte(data)}))
	}
	require.NoError(t, s.PutSummary(ctx, "cells 2", run.ID, store.Summary{Held: store.Held{Samples: 1, Last: 1}, Data: []byte("other kind")}))
	got, err := s.Summaries(ctx, "cells 1")
	require.NoError(t, err)
	require.Equal(t, map[string]store.Summary{run.ID: {Held: h, Data: []byte("second")}}, got, "replaced in place, apart from another kind")
	require.ErrorIs(t, s.PutSummary(ctx, "cells 1", "no-such-run", store.Summary{Data: []byte("x")}), store.ErrNoRun)

	extra := *samples[1]
	extra.Rep = 9
	require.NoError(t, s.Write(ctx, run.ID, &extra))
	now, err := s.RunHeld(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, h.Samples+1, now.Samples)
	require.Greater(t, now.Last, h.Last, "a sample added is numbered above the summary's")

	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, "summaries", st.Tables[3].Name)
	require.Equal(t, int64(2), st.Tables[3].Rows)

	_, err = s.Archive(ctx, filepath.Join(t.TempDir(), "ds"), time.Now())
	require.NoError(t, err)
	for _, kind := range []string{"cells 1", "cells 2"} {
		got, err := s.Summaries(ctx, kind)
		require.NoError(t, err)
		require.Empty(t, got, "archived with the run's samples: %s", kind)
	}
	held, err = s.RunSamples(ctx)
	require.NoError(t, err)
	require.Empty(t, held, "the store holds none of the run's samples")
}

func TestSummaries(t *testing.T) { summaries(t, filepath.Join(t.TempDir(), "s.db")) }

func TestPostgresSummaries(t *testing.T) { summaries(t, testutil.StartPostgres(t)) }

// runSamplesCounts: RunSamples counts every run's samples as reading
// them does (on SQLite the runs are shared out to readers at once), and
// leaves out a run that holds none.
func runSamplesCounts(t *testing.T, dsn string) {
	ctx := context.Background()
	s := campaignStore(t, dsn)
	require.NoError(t, s.BeginRun(ctx, store.Run{ID: "empty", Kind: "measure", StartedAt: day2, Spec: []byte(`{}`)}))
	held, err := s.RunSamples(ctx)
	require.NoError(t, err)
	want := map[string]int64{}
	for _, id := range []string{"old", "lab", "wild", "empty"} {
		if n := count(t, s, store.Filter{Runs: []string{id}, Superseded: true}); n > 0 {
			want[id] = int64(n)
		}
	}
	require.Equal(t, map[string]int64{"old": 8, "lab": 8, "wild": 8}, want)
	require.Equal(t, want, held)
}

func TestRunSamplesCounts(t *testing.T) { runSamplesCounts(t, filepath.Join(t.TempDir(), "s.db")) }

// runSamplesOf: where kind's summaries count every sample the store
// holds, RunSamplesOf takes their counts, on SQLite without counting a
// run (shown by summaries sharing the right total out wrongly, which
// only a hand can write: a summary never counts more than its run
// holds); a run without one, a sample added or a sample archived send it
// to RunSamples' counts.
func runSamplesOf(t *testing.T, dsn string, postgres bool) {
	ctx := context.Background()
	s := campaignStore(t, dsn)
	counts, err := s.RunSamples(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"old": 8, "lab": 8, "wild": 8}, counts)
	heldOf := func(kind string) map[string]int64 {
		t.Helper()
		got, err := s.RunSamplesOf(ctx, kind)
		require.NoError(t, err)
		return got
	}
	put := func(kind, run string, n int64) {
		t.Helper()
		require.NoError(t, s.PutSummary(ctx, kind, run, store.Summary{Held: store.Held{Samples: n, Last: 1}, Data: []byte("x")}))
	}
	require.Equal(t, counts, heldOf("cells"), "no summaries")
	put("cells", "old", 8)
	put("cells", "lab", 8)
	put("other", "wild", 8)
	require.Equal(t, counts, heldOf("cells"), "a run without one of this kind")
	put("cells", "wild", 8)
	require.Equal(t, counts, heldOf("cells"))

	put("cells", "old", 7)
	put("cells", "lab", 9)
	if postgres {
		require.Equal(t, counts, heldOf("cells"), "PostgreSQL counts every run")
	} else {
		require.Equal(t, map[string]int64{"old": 7, "lab": 9, "wild": 8}, heldOf("cells"), "the summaries taken at their word")
	}
	put("cells", "old", 8)
	put("cells", "lab", 8)

	x := &measure.Sample{Task: measure.Task{URL: "quic://t:853", Target: "t", Transport: "doq", Condition: "fresh", Rep: 99}, Start: day2,
		Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR"}, Status: transport.StatusOK}
	require.NoError(t, s.Write(ctx, "lab", x))
	counts["lab"]++
	require.Equal(t, counts, heldOf("cells"), "a sample added is counted")

	_, err = s.Archive(ctx, filepath.Join(t.TempDir(), "ds"), cut)
	require.NoError(t, err)
	after, err := s.RunSamples(ctx)
	require.NoError(t, err)
	require.Less(t, after["old"], int64(8), "the first day archived")
	require.Equal(t, after, heldOf("cells"), "the archive took the summaries of the runs it moved")
}

func TestRunSamplesOf(t *testing.T) { runSamplesOf(t, filepath.Join(t.TempDir(), "s.db"), false) }

func TestPostgresRunSamplesOf(t *testing.T) { runSamplesOf(t, testutil.StartPostgres(t), true) }

// TestScanOfRunsFindsTheirEnds: a scan of some runs reads from their
// first sample to their last, found near the table's ends or, where
// they are not there (probing a sample from each end), in the runs'
// index: a run in the middle of the table, one at either end, two. A
// range of one number each: a wrong end loses samples.
func TestScanOfRunsFindsTheirEnds(t *testing.T) {
	s := campaignStore(t, filepath.Join(t.TempDir(), "s.db"))
	for _, probe := range []int64{1 << 16, 1} {
		restore := store.SetScanSizes(1, probe)
		for _, runs := range [][]string{{"old"}, {"lab"}, {"wild"}, {"old", "wild"}, {"lab", "wild"}, {"old", "lab"}, {"old", "lab", "wild"}} {
			require.Equal(t, 8*len(runs), count(t, s, store.Filter{Runs: runs, Superseded: true}), "%v, probing %d", runs, probe)
		}
		restore()
	}
}

func TestPostgresRunSamplesCounts(t *testing.T) { runSamplesCounts(t, testutil.StartPostgres(t)) }

package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
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

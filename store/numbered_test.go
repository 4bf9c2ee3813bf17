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

// numberedSamples checks what schema 9's numbers must not change: a
// target that is the URL (kept as NULL) and one that is not read back
// as written, through the rows and the view alike; samples keep to
// their run; a sample of a run the store does not hold is refused and
// leaves nothing behind.
func numberedSamples(t *testing.T, dsn string) {
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	sample := func(url, target string, rep int) *measure.Sample {
		return &measure.Sample{Task: measure.Task{URL: url, Target: target, Transport: "udp", Condition: "fresh", Rep: rep}, Start: at.Add(time.Duration(rep) * time.Second),
			Status: transport.StatusOK, Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: float64(10 + rep)}}}
	}
	ids := []string{"run-a", "run-b", "run-c"}
	for i, id := range ids {
		run := store.NewRun("measure", "", nil)
		run.ID, run.StartedAt = id, at.Add(time.Duration(i)*time.Minute)
		require.NoError(t, s.BeginRun(ctx, run))
	}
	require.NoError(t, s.Write(ctx, "run-b", sample("udp://192.0.2.53:53", "udp://192.0.2.53:53", 0)))
	require.NoError(t, s.Write(ctx, "run-b", sample("udp://192.0.2.53:53", "resolver.example", 1)))
	require.NoError(t, s.Write(ctx, "run-c", sample("udp://192.0.2.54:53", "udp://192.0.2.54:53", 0)))

	err = s.Write(ctx, "run-nope", sample("udp://192.0.2.55:53", "udp://192.0.2.55:53", 0))
	require.ErrorIs(t, err, store.ErrNoRun, "a sample of a run the store does not hold")
	require.ErrorContains(t, err, "run-nope")
	require.True(t, store.Permanent(err), "never retried: the run will not appear")
	var cols, raws, nulls int
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM sample_cols), (SELECT COUNT(*) FROM sample_raw), (SELECT COUNT(*) FROM sample_cols WHERE target IS NULL)`).Scan(&cols, &raws, &nulls))
	require.Equal(t, []int{3, 3}, []int{cols, raws}, "nothing of the refused sample stays")
	require.Equal(t, 2, nulls, "a target that is the URL is kept as NULL")

	rows, err := s.Rows(ctx, "run-b")
	require.NoError(t, err)
	require.Len(t, rows, 2, "a run's samples, none of its neighbours'")
	byRep := map[int64]store.Row{}
	for _, r := range rows {
		require.Equal(t, "run-b", r.RunID)
		byRep[r.Rep] = r
	}
	require.Equal(t, "udp://192.0.2.53:53", byRep[0].Target, "a target that is the URL")
	require.Equal(t, "resolver.example", byRep[1].Target)
	var viewed []string
	q, err := s.DB().QueryContext(ctx, `SELECT run_id || ' ' || target FROM samples ORDER BY id`)
	require.NoError(t, err)
	defer q.Close()
	for q.Next() {
		var v string
		require.NoError(t, q.Scan(&v))
		viewed = append(viewed, v)
	}
	require.Equal(t, []string{"run-b udp://192.0.2.53:53", "run-b resolver.example", "run-c udp://192.0.2.54:53"}, viewed, "the view gives the run's ID and the target back")
	raw, err := s.Raw(ctx, "run-c", store.TaskKey(measure.Task{URL: "udp://192.0.2.54:53", Transport: "udp", Condition: "fresh"}))
	require.NoError(t, err)
	require.Contains(t, string(raw), `"target":"udp://192.0.2.54:53"`, "the record whole, under the sample's number")
}

func TestNumberedSamples(t *testing.T) {
	numberedSamples(t, filepath.Join(t.TempDir(), "s.db"))
}

func TestPostgresNumberedSamples(t *testing.T) {
	numberedSamples(t, testutil.StartPostgres(t))
}

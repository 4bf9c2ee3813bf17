package store_test

import (
	"context"
	"database/sql"
	"fmt"
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
	var cols, nulls, keys int
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM sample_cols), (SELECT COUNT(*) FROM sample_cols WHERE target IS NULL), (SELECT COUNT(task_key) FROM sample_cols)`).Scan(&cols, &nulls, &keys))
	require.Equal(t, 3, cols, "nothing of the refused sample stays")
	require.Equal(t, 2, nulls, "a target that is the URL is kept as NULL")
	require.Zero(t, keys, "a key its columns spell is not kept (schema 10)")

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

// sampleKeys checks schema 10's keys: a sample is found in its run by
// its key's hash; the row keeps the key only where its columns do not
// spell it (a page where the condition would be, a vantage point without
// a name), and the view and Done give every key back as written; a
// sample written twice is refused unless once, and two keys that hash
// alike are an error, never a sample taken for another.
func sampleKeys(t *testing.T, dsn string) {
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	run := store.NewRun("measure", "", nil)
	require.NoError(t, s.BeginRun(ctx, run))
	sample := func(task measure.Task, v *measure.Vantage) *measure.Sample {
		task.Target = task.URL
		return &measure.Sample{Task: task, Vantage: v, Start: time.Now(), Status: transport.StatusOK,
			Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: 3}}}
	}
	u := "udp://192.0.2.53:53"
	written := []*measure.Sample{
		sample(measure.Task{URL: u, Transport: "udp", Condition: "fresh", Rep: 12}, nil),
		sample(measure.Task{URL: u, Transport: "udp", Condition: "fresh", Rep: 12, Round: 3}, &measure.Vantage{Name: "fra"}),
		sample(measure.Task{URL: u, Transport: "udp", Page: "https://a.test/", Rep: 1}, nil),           // the key says page:, the column the condition
		sample(measure.Task{URL: u, Transport: "udp", Condition: "fresh", Rep: 2}, &measure.Vantage{}), // "/" before the key, no name in the column
	}
	want := map[string]bool{}
	for _, x := range written {
		require.NoError(t, s.Write(ctx, run.ID, x))
		want[store.SampleKey(x)] = true
	}
	done, err := s.Done(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, want, done, "every key as written")
	var kept []string
	rows, err := s.DB().QueryContext(ctx, `SELECT task_key FROM sample_cols WHERE task_key IS NOT NULL ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kept = append(kept, k)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Equal(t, []string{store.SampleKey(written[2]), store.SampleKey(written[3])}, kept, "only the keys the columns do not spell")
	for _, x := range written {
		raw, err := s.Raw(ctx, run.ID, store.SampleKey(x))
		require.NoError(t, err)
		require.Contains(t, string(raw), fmt.Sprintf(`"rep":%d`, x.Rep))
	}

	err = s.Write(ctx, run.ID, written[0])
	require.ErrorIs(t, err, store.ErrHeld, "nothing is measured twice into a run")
	require.True(t, store.Permanent(err))
	require.NoError(t, s.InTx(ctx, func(tx *sql.Tx) error {
		ok, err := s.WriteOnce(ctx, tx, run.ID, written[0])
		require.False(t, ok, "held already")
		return err
	}))

	// Every key hashing alike: the second sample is another's hash.
	restore := store.SetKeyHash(func(string) int64 { return 42 })
	defer restore()
	other := store.NewRun("measure", "", nil)
	require.NoError(t, s.BeginRun(ctx, other))
	require.NoError(t, s.Write(ctx, other.ID, written[0]))
	err = s.Write(ctx, other.ID, written[1])
	require.ErrorIs(t, err, store.ErrKeyCollision)
	require.ErrorContains(t, err, store.SampleKey(written[0]), "names the sample it collides with")
	require.NoError(t, s.InTx(ctx, func(tx *sql.Tx) error {
		_, err := s.WriteOnce(ctx, tx, other.ID, written[1])
		require.ErrorIs(t, err, store.ErrKeyCollision, "not taken for a sample held already")
		return nil
	}))
	_, err = s.Raw(ctx, other.ID, store.SampleKey(written[1]))
	require.ErrorContains(t, err, "no sample", "a key is found by its hash and itself")
}

func TestSampleKeys(t *testing.T) { sampleKeys(t, filepath.Join(t.TempDir(), "s.db")) }

func TestPostgresSampleKeys(t *testing.T) { sampleKeys(t, testutil.StartPostgres(t)) }

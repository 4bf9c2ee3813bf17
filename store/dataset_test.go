package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// day1 and day2 are the two days the campaign store measured on; the
// archive's cut is between them.
var (
	day1 = time.Date(2026, 11, 20, 23, 59, 59, 500e6, time.UTC)
	day2 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	cut  = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
)

// campaignStore is a store of three runs over two days: "old" measured
// again by "lab" (a supersession), and "wild" from two vantage points;
// samples and results of both days.
func campaignStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	for i, id := range []string{"old", "lab", "wild"} {
		require.NoError(t, s.BeginRun(ctx, store.Run{ID: id, Kind: "measure", StartedAt: day1.Add(time.Duration(i) * time.Minute), Profile: "fiber", Spec: json.RawMessage(`{}`)}))
	}
	for i := range 24 {
		run := []string{"old", "lab", "wild"}[i%3]
		at := day1.Add(time.Duration(i) * time.Millisecond)
		if i >= 12 {
			at = day2.Add(time.Duration(i) * time.Second)
		}
		x := &measure.Sample{Task: measure.Task{URL: "quic://t:853", Target: "t", Transport: "doq", Condition: "fresh", Rep: i}, Start: at,
			Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: float64(10 + i), WireMs: float64(i)},
				Bytes: transport.Counts{Sent: int64(i), Received: 2 * int64(i)}, Packets: transport.Counts{Sent: 1, Received: 2}},
			RTTs: &measure.InRTTs{Total: float64(i) / 10}, Status: transport.StatusOK}
		if run == "wild" {
			x.Vantage = &measure.Vantage{Name: []string{"fra1", "sin-2"}[i%2], Location: "Frankfurt, DE", ASN: 64500, Network: "Example", Address: "192.0.2.1"}
		}
		require.NoError(t, s.Write(ctx, run, x))
		require.NoError(t, s.WriteResult(ctx, run, testLoad, fmt.Sprint("load-", i), at, map[string]any{"plt_ms": 100 + i}))
	}
	require.NoError(t, s.Supersede(ctx, "old", "lab", "link check after: RTT error"))
	return s
}

// snapshot is what analysis reads of a store: every sample (the
// superseded too, and without them), every result, the runs, the
// supersessions and the vantage points.
func snapshot(t *testing.T, s *store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, f := range []store.Filter{{}, {Superseded: true}, {Vantage: "sin-2"}, {RunPrefix: "wi"}} {
		var rows []string
		require.NoError(t, s.EachRow(ctx, f, func(r *store.Row) error {
			rows = append(rows, fmt.Sprintf("%s %s %s %s %v %s %d %s", r.RunID, r.Key, r.Vantage, r.VantageLocation, *r.TotalMs, r.StartedAt.Format(time.RFC3339Nano), r.Rep, r.Profile))
			return nil
		}))
		slices.Sort(rows)
		fmt.Fprintf(&b, "samples %+v:\n%s\n", f, strings.Join(rows, "\n"))
	}
	// What analysis reads, in any order, from every reader.
	var timings []string
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	var mu sync.Mutex
	require.NoError(t, s.EachTiming(ctx, store.Filter{}, func() func(*store.Row) error {
		return func(r *store.Row) error {
			mu.Lock()
			defer mu.Unlock()
			timings = append(timings, fmt.Sprintf("%s %s %s %s %s %s %s %s %s %s %s %s %d %d %d %d %s %s %d %s %s", r.RunID, r.Vantage, r.Target, r.Transport, r.Condition, r.Status, r.Rcode,
				f(r.TotalMs), f(r.ProbeRTTMs), f(r.TotalRTT), f(r.ResolveRTT), f(r.WireMs), r.BytesSent, r.BytesReceived, r.PacketsSent, r.PacketsReceived,
				r.VantageLocation, r.VantageNetwork, r.VantageASN, r.VantageAddress, r.Profile))
			return nil
		}
	}))
	slices.Sort(timings)
	fmt.Fprintf(&b, "timings:\n%s\n", strings.Join(timings, "\n"))
	// Results come in the order they were taken; a database orders the
	// times as text, which puts .51Z after .511Z: sorted here.
	var results []string
	require.NoError(t, s.Results(ctx, "", testLoad, func(id string, raw []byte) error {
		results = append(results, fmt.Sprintf("result %s %s", id, raw))
		return nil
	}))
	slices.Sort(results)
	b.WriteString(strings.Join(results, "\n"))
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	for _, r := range runs {
		fmt.Fprintf(&b, "run %s %s\n", r.ID, r.StartedAt)
	}
	sup, err := s.Supersessions(ctx, "")
	require.NoError(t, err)
	vs, err := s.Vantages(ctx)
	require.NoError(t, err)
	fmt.Fprintf(&b, "superseded %v\nvantages %v\n", sup, vs)
	return b.String()
}

func count(t *testing.T, s *store.Store, f store.Filter) int {
	n := 0
	require.NoError(t, s.EachRow(context.Background(), f, func(*store.Row) error { n++; return nil }))
	return n
}

// archiveAndRead: an archive moves the old day out of the store, the
// store and the dataset together read as the store did, a second
// archive moves nothing, and a dataset exported (not archived) reads
// alone as the store and is refused beside it.
func archiveAndRead(t *testing.T, dsn string) {
	ctx := context.Background()
	s := campaignStore(t, dsn)
	before := snapshot(t, s)

	exported := filepath.Join(t.TempDir(), "exported")
	x, err := s.ExportDataset(ctx, exported, store.Filter{Superseded: true}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, [3]int64{3, 24, 25}, [3]int64{x.Runs, x.Samples, x.Results}, "runs, samples and results (the supersession too)")
	again, err := s.ExportDataset(ctx, exported, store.Filter{Superseded: true}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, [3]int64{0, 0, 49}, [3]int64{again.Samples, again.Results, again.Known}, "an export adds only what the dataset lacks")
	require.Zero(t, again.Files)
	d, err := store.OpenDataset(ctx, exported)
	require.NoError(t, err)
	require.ErrorContains(t, s.Attach(ctx, d), "exported, not archived")
	empty, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer empty.Close()
	require.NoError(t, empty.Attach(ctx, d))
	require.Equal(t, before, snapshot(t, empty), "the dataset alone reads as the store")
	// A run read by its ID comes from the dataset where the database
	// holds none, whole; one neither holds is no run.
	for _, id := range []string{"lab", "old", "wild"} {
		want, err := s.Run(ctx, id)
		require.NoError(t, err)
		got, err := empty.Run(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want.StartedAt.UnixNano(), got.StartedAt.UnixNano(), id)
		want.StartedAt, got.StartedAt = time.Time{}, time.Time{}
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		require.JSONEq(t, string(wj), string(gj), id)
	}
	_, err = empty.Run(ctx, "no-such-run")
	require.ErrorIs(t, err, store.ErrNoRun)

	archive := filepath.Join(t.TempDir(), "archive")
	x, err = s.Archive(ctx, archive, cut)
	require.NoError(t, err)
	require.Equal(t, [2]int64{12, 12}, [2]int64{x.Samples, x.Results}, "the first day's samples and results")
	require.Equal(t, 12, count(t, s, store.Filter{Superseded: true}), "the store keeps the second day")
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 3, "the runs stay in the store")
	x, err = s.Archive(ctx, archive, cut)
	require.NoError(t, err)
	require.Zero(t, x.Samples+x.Results+x.Known, "nothing is left to archive")

	d, err = store.OpenDataset(ctx, archive)
	require.NoError(t, err)
	require.NoError(t, s.Attach(ctx, d))
	require.Equal(t, before, snapshot(t, s), "the store and its archive read as the store before")
	m := d.Manifest()
	require.Equal(t, []string{"run_id", "vantage", "day"}, m.Partitioning)
	var dirs []string
	for _, f := range m.Files {
		if f.Table == store.TableSamples {
			dirs = append(dirs, filepath.Dir(f.Path))
		}
	}
	slices.Sort(dirs)
	require.Equal(t, []string{"run_id=lab/vantage=-/day=2026-11-20", "run_id=old/vantage=-/day=2026-11-20",
		"run_id=wild/vantage=fra1/day=2026-11-20", "run_id=wild/vantage=sin-2/day=2026-11-20"}, dirs)
}

func TestDatasetArchive(t *testing.T) { archiveAndRead(t, filepath.Join(t.TempDir(), "s.db")) }

func TestPostgresDatasetArchive(t *testing.T) { archiveAndRead(t, testutil.StartPostgres(t)) }

// TestDatasetWriteIsGuarded: one export writes at a time; files an
// export that died left are removed before the next one writes; a
// directory that holds something else is no dataset to add to; a
// manifest naming a file outside the dataset is refused.
func TestDatasetWriteIsGuarded(t *testing.T) {
	ctx := context.Background()
	s := campaignStore(t, filepath.Join(t.TempDir(), "s.db"))
	dir := t.TempDir()
	_, err := s.ExportDataset(ctx, dir, store.Filter{}, cut)
	require.NoError(t, err)

	lock := filepath.Join(dir, "_manifest.lock")
	require.NoError(t, os.WriteFile(lock, []byte("1\n"), 0o644))
	_, err = s.ExportDataset(ctx, dir, store.Filter{}, time.Time{})
	require.ErrorContains(t, err, "another export is writing it")
	require.NoError(t, os.Remove(lock))

	stray := filepath.Join(dir, "run_id=lab", "vantage=-", "day=2026-11-22", "part-died.parquet")
	require.NoError(t, os.MkdirAll(filepath.Dir(stray), 0o755))
	require.NoError(t, os.WriteFile(stray, []byte("half a file"), 0o644))
	x, err := s.ExportDataset(ctx, dir, store.Filter{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, 1, x.Orphans)
	require.NoFileExists(t, stray)
	require.Equal(t, int64(8), x.Samples, "the second day's samples of the runs not superseded")

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o644))
	_, err = s.ExportDataset(ctx, other, store.Filter{}, time.Time{})
	require.ErrorContains(t, err, "not empty")

	m, err := os.ReadFile(filepath.Join(dir, "_manifest.json"))
	require.NoError(t, err)
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "_manifest.json"), []byte(strings.Replace(string(m), `"path": "run_id=`, `"path": "../run_id=`, 1)), 0o644))
	_, err = store.OpenDataset(ctx, bad)
	require.ErrorContains(t, err, "outside the dataset")
	// A file's digest names its summary in the reader's cache: a
	// manifest whose digest is a path had a report write outside it.
	var digest struct {
		Files []struct{ SHA256 string }
	}
	require.NoError(t, json.Unmarshal(m, &digest))
	require.True(t, store.IsDigest(digest.Files[0].SHA256), "an export writes digests")
	require.NoError(t, os.WriteFile(filepath.Join(bad, "_manifest.json"), []byte(strings.Replace(string(m), digest.Files[0].SHA256, "../../../../tmp/escaped", 1)), 0o644))
	_, err = store.OpenDataset(ctx, bad)
	require.ErrorContains(t, err, `the SHA-256 "../../../../tmp/escaped", which is not one`)
	for _, s := range []string{"", "0", strings.Repeat("A", 64), strings.Repeat("g", 64), strings.Repeat("a", 63), strings.Repeat("0", 65), strings.Repeat("../", 21) + "x"} {
		require.False(t, store.IsDigest(s), "%q", s)
	}
}

// TestDatasetExportFailsWhole: the samples are written by a shard a
// core, each its own runs and days' files; one that cannot write (here
// a file where a partition's directory goes) fails the export, and every
// shard's files go with it: no file, no temporary, no manifest, until
// an export that can write writes them all.
func TestDatasetExportFailsWhole(t *testing.T) {
	ctx := context.Background()
	s := campaignStore(t, filepath.Join(t.TempDir(), "s.db"))
	dir := t.TempDir()
	_, err := s.ExportDataset(ctx, dir, store.Filter{}, cut) // the first day
	require.NoError(t, err)
	files := func() []string {
		var out []string
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, p)
			}
			return err
		}))
		return out
	}
	before := files()
	manifest, err := os.ReadFile(filepath.Join(dir, "_manifest.json"))
	require.NoError(t, err)
	blocker := filepath.Join(dir, "run_id=wild", "vantage=sin-2", "day=2026-11-22")
	require.NoError(t, os.MkdirAll(filepath.Dir(blocker), 0o755))
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	_, err = s.ExportDataset(ctx, dir, store.Filter{}, time.Time{})
	require.ErrorContains(t, err, "day=2026-11-22")
	require.ElementsMatch(t, append(before, blocker), files(), "nothing of the failed export is left")
	again, err := os.ReadFile(filepath.Join(dir, "_manifest.json"))
	require.NoError(t, err)
	require.Equal(t, string(manifest), string(again))

	require.NoError(t, os.Remove(blocker))
	x, err := s.ExportDataset(ctx, dir, store.Filter{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, int64(8), x.Samples, "the second day's samples of the runs not superseded")
	d, err := store.OpenDataset(ctx, dir)
	require.NoError(t, err)
	r, err := store.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Attach(ctx, d))
	keys := map[string]int{}
	require.NoError(t, r.EachRow(ctx, store.Filter{}, func(row *store.Row) error {
		keys[row.RunID+" "+row.Key]++
		return nil
	}))
	require.Len(t, keys, 16)
	for k, n := range keys {
		require.Equal(t, 1, n, "%s read once", k)
	}
}

// TestDatasetReadByDuckDBAndPandas: DuckDB's read_parquet with Hive
// partitioning and pandas.read_parquet read a dataset with no other
// options: every sample, its partitions' columns among the rest.
func TestDatasetReadByDuckDBAndPandas(t *testing.T) {
	py := testutil.Need(t, "python3", "apt-get install python3")
	if exec.Command(py, "-c", "import duckdb, pyarrow, pandas").Run() != nil {
		testutil.Missing(t, "duckdb, pyarrow or pandas not found; install them with: pip install duckdb pyarrow pandas (or run bash .ci/run)")
	}
	ctx := context.Background()
	s := campaignStore(t, filepath.Join(t.TempDir(), "s.db"))
	dir := t.TempDir()
	_, err := s.ExportDataset(ctx, dir, store.Filter{Superseded: true}, cut)
	require.NoError(t, err)
	_, err = s.ExportDataset(ctx, dir, store.Filter{Superseded: true}, time.Time{}) // a second round, appended
	require.NoError(t, err)
	out, err := exec.Command(py, "-c", `
import duckdb, pandas, sys
d = sys.argv[1]
print(duckdb.sql(f"""SELECT count(*), count(DISTINCT run_id), count(DISTINCT day), sum(total_ms),
	count(*) FILTER (WHERE vantage = 'sin-2'), count(*) FILTER (WHERE vantage = '-')
	FROM read_parquet('{d}/**/*.parquet', hive_partitioning=true)""").fetchall()[0])
df = pandas.read_parquet(d)
print(len(df), sorted(df["run_id"].astype(str).unique()), round(df["total_ms"].sum(), 3), sorted(df.columns)[:4])
print(duckdb.sql(f"SELECT count(*) FROM read_json('{d}/_records/results/**/*.jsonl.zst')").fetchall()[0])
`, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, `(24, 3, 2, 516.0, 4, 16)
24 ['lab', 'old', 'wild'] 516.0 ['alpn', 'bytes_received', 'bytes_sent', 'condition']
(25,)
`, string(out))
}

// TestDatasetFromS3: a dataset copied whole to an S3-compatible store
// (versitygw) reads as it does from its directory; wrong keys and a
// prefix holding no dataset get a line each; writing there is refused.
func TestDatasetFromS3(t *testing.T) {
	s3 := testutil.StartS3(t)
	ctx := context.Background()
	s := campaignStore(t, filepath.Join(t.TempDir(), "s.db"))
	before := snapshot(t, s)
	dir := filepath.Join(s3.Root, "datasets", "year", "2026")
	_, err := s.ExportDataset(ctx, dir, store.Filter{Superseded: true}, time.Time{})
	require.NoError(t, err)
	t.Setenv("AWS_ENDPOINT_URL", s3.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.Secret)
	t.Setenv("AWS_REGION", "us-east-1")
	d, err := store.OpenDataset(ctx, "s3://datasets/year/2026")
	require.NoError(t, err)
	empty, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer empty.Close()
	require.NoError(t, empty.Attach(ctx, d))
	require.Equal(t, before, snapshot(t, empty), "the dataset in a bucket reads as the store")

	_, err = store.OpenDataset(ctx, "s3://datasets/year/2025")
	require.ErrorContains(t, err, "no _manifest.json")
	_, err = s.ExportDataset(ctx, "s3://datasets/year/2027", store.Filter{}, time.Time{})
	require.ErrorContains(t, err, "written to a directory only")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	_, err = store.OpenDataset(ctx, "s3://datasets/year/2026")
	require.ErrorContains(t, err, "dataset s3://datasets/year/2026")
	require.NotContains(t, err.Error(), "no _manifest.json", "refused, not missing")
}

// TestRunWithoutSpecArchives: a run stored without a spec (a test's, a
// tool's) reads back with none, not an empty document JSON cannot
// write, so its results archive.
func TestRunWithoutSpecArchives(t *testing.T) {
	ctx := context.Background()
	s := tempStore(t)
	start := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, s.BeginRun(ctx, store.Run{ID: "bare", Kind: "web", StartedAt: start}))
	err := s.WriteResult(ctx, "bare", store.Kind("web-load"), "k", start, map[string]int{"rep": 1})
	require.NoError(t, err)
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Nil(t, runs[0].Spec)
	x, err := s.Archive(ctx, filepath.Join(t.TempDir(), "archive"), start.AddDate(0, 0, 1))
	require.NoError(t, err)
	require.Equal(t, int64(1), x.Results)
}

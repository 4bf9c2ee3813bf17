package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// briefKind is a kind whose briefs leave out member big and member dns
// of member load.
var briefKind = NewKind("brief-test")

func init() { Brief(briefKind, "big", "load.dns") }

// briefRecords are results of briefKind: an object briefed, one whose
// load is not an object, and a record that is no object at all.
var briefRecords = map[string]any{
	"a": map[string]any{"n": 1, "big": []int{1, 2, 3}, "load": map[string]any{"dns": "x", "keep": true, "big": 2}, "z": "<s>"},
	"b": map[string]any{"n": 2, "load": nil, "big": map[string]any{"deep": 1}},
	"c": []int{7},
}

// briefed is what an analysis reads of each of briefRecords.
var briefed = map[string]string{
	"a": `{"big":[1,2,3],"load":{"big":2,"dns":"x","keep":true},"n":1,"z":"\u003cs\u003e"}`,
	"b": `{"big":{"deep":1},"load":null,"n":2}`,
	"c": `[7]`,
}

// packedBriefs is StoredBriefs by StoredPacked: the results kept as
// handed, each unpacked only once all are read.
func packedBriefs(s *Store) func(context.Context, []string, Kind, int64, func(string, []byte) error) error {
	return func(ctx context.Context, runs []string, kind Kind, after int64, f func(string, []byte) error) error {
		var ids []string
		var zs [][]byte
		if err := s.StoredPacked(ctx, runs, kind, after, func(id string, z []byte) error {
			ids, zs = append(ids, id), append(zs, z)
			return nil
		}); err != nil {
			return err
		}
		for i, z := range zs {
			raw, err := Unpack(z)
			if err != nil {
				return err
			}
			if err := f(ids[i], raw); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestPackedKept: what StoredPacked hands is the caller's to keep, for a
// result whose record SQLite assembles from overflow pages in memory
// the next row takes, and the store's, and a packed column that is
// neither brief nor record is an error of Unpack's, not a panic.
func TestPackedKept(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.BeginRun(ctx, Run{ID: "r", Kind: "t", StartedAt: time.Now()}))
	var want []string
	for i := range 4 {
		big := make([]byte, 40<<10) // past a page, and past what zstd makes small
		for j := range big {
			big[j] = 'a' + byte((j*7919+i*104729)%26^(j>>3)%7)
		}
		rec := map[string]any{"n": i, "big": string(big)}
		require.NoError(t, s.WriteResult(ctx, "r", "packed-test", fmt.Sprint(i), time.Unix(int64(i), 0), rec))
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		want = append(want, string(b))
	}
	var got []string
	require.NoError(t, packedBriefs(s)(ctx, []string{"r"}, "packed-test", 0, func(_ string, raw []byte) error {
		got = append(got, string(raw))
		return nil
	}))
	require.Equal(t, want, got)
	for _, z := range [][]byte{nil, {briefMark}, {200, 1, 2}} {
		_, err := Unpack(z)
		require.Error(t, err, "%q", z)
	}
}

func TestBriefs(t *testing.T) { briefed14(t, filepath.Join(t.TempDir(), "s.db")) }

func TestPostgresBriefs(t *testing.T) { briefed14(t, testutil.StartPostgres(t)) }

func briefed14(t *testing.T, dsn string) {
	ctx := context.Background()
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.BeginRun(ctx, Run{ID: "r", Kind: "t", StartedAt: time.Now()}))
	for _, k := range slices.Sorted(maps.Keys(briefRecords)) { // in the order of both engines' keys
		require.NoError(t, s.WriteResult(ctx, "r", briefKind, k, time.Now(), briefRecords[k]))
	}
	read := func(each func(context.Context, []string, Kind, int64, func(string, []byte) error) error) []string {
		var out []string
		require.NoError(t, each(ctx, []string{"r"}, briefKind, 0, func(_ string, raw []byte) error {
			out = append(out, string(raw))
			return nil
		}))
		return out
	}
	whole := []string{briefed["a"], briefed["b"], briefed["c"]}
	require.ElementsMatch(t, whole, read(s.StoredResults), "the records whole")
	want := []string{`{"load":{"big":2,"keep":true},"n":1,"z":"\u003cs\u003e"}`, `{"load":null,"n":2}`, `[7]`}
	require.ElementsMatch(t, want, read(s.StoredBriefs), "the briefs, and the record that has none")
	require.Equal(t, read(s.StoredBriefs), read(packedBriefs(s)), "StoredPacked hands the same, unpacked by Unpack")

	// A brief of members left out otherwise (another build's analysis)
	// is stale: its record is read.
	var b []byte
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT brief FROM results WHERE task_key = 'a'`).Scan(&b))
	copy(b[1:briefHead], "another")
	_, err = s.db.ExecContext(ctx, s.rebind(`UPDATE results SET brief = ? WHERE task_key = 'a'`), b)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{briefed["a"], want[1], want[2]}, read(s.StoredBriefs))
	require.Equal(t, read(s.StoredBriefs), read(packedBriefs(s)))

	// BriefResults briefs those without a brief or with a stale one, a
	// batch at a time; cut short, it keeps what it did.
	_, err = s.db.ExecContext(ctx, `UPDATE results SET brief = NULL WHERE task_key = 'b'`)
	require.NoError(t, err)
	defer SetPackHooks(1, nil)()
	cut, cancel := context.WithCancel(ctx)
	n, err := s.BriefResults(cut, func(int) { cancel() })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, n, "the first batch kept")
	n, err = s.BriefResults(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the rest: c is no object, and has none")
	require.ElementsMatch(t, want, read(s.StoredBriefs))
	n, err = s.BriefResults(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left")

	// store stats counts those without a current one (c: no object,
	// none can be made).
	unbriefed := func() int64 {
		st, err := s.Stats(ctx)
		require.NoError(t, err)
		for _, k := range st.Kinds {
			if k.Kind == string(briefKind) {
				return k.Unbriefed
			}
		}
		t.Fatal("no brief-test kind in the stats")
		return 0
	}
	require.Equal(t, int64(1), unbriefed())
	_, err = s.db.ExecContext(ctx, `UPDATE results SET brief = NULL WHERE task_key = 'a'`)
	require.NoError(t, err)
	require.Equal(t, int64(2), unbriefed())
	_, err = s.BriefResults(ctx, nil)
	require.NoError(t, err)

	// A store of schema 13 gets the column; its results, without briefs,
	// are read whole. (Its samples' table, empty, is put back as schemas
	// 11 to 15 had it, for the upgrade to 16 to rebuild.)
	s.Close()
	old, err := Open(ctx, dsn)
	require.NoError(t, err)
	for _, stmt := range []string{`ALTER TABLE results DROP COLUMN brief`, `DROP VIEW samples`, `DROP TABLE sample_cols`, old.typed(sampleColsV15),
		`UPDATE schema_version SET version = 13`} {
		_, err = old.db.ExecContext(ctx, stmt)
		require.NoError(t, err)
	}
	old.Close()
	s, err = Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	require.ElementsMatch(t, whole, read(s.StoredBriefs))
	var v int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v))
	require.Equal(t, SchemaVersion, v)
}

// FuzzBrief: no octets make a brief panic, and a brief made is the
// record less the members left out, every other member's value the
// same.
func FuzzBrief(f *testing.F) {
	for _, v := range briefRecords {
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	f.Add([]byte(`{"load":{"dns":1,"dns":2},"big":[{"big":1}],"x":"\u00e9\ud800"}`))
	f.Add([]byte(`{"a":1} {"b":2}`))
	f.Add([]byte(`{"load":{"load":{"dns":1}}}`))
	b := briefFor(briefKind)
	f.Fuzz(func(t *testing.T, raw []byte) {
		z := b.make(raw)
		if z == nil {
			return
		}
		require.Equal(t, b.head, z[:briefHead])
		got, err := unpackRaw(z[briefHead:])
		require.NoError(t, err)
		var whole, brief map[string]any
		if json.Unmarshal(raw, &whole) != nil {
			return // encoding/json is stricter than jsontext (invalid UTF-8, duplicate names)
		}
		require.NoError(t, json.Unmarshal(got, &brief), "%s", got)
		delete(whole, "big")
		if load, ok := whole["load"].(map[string]any); ok {
			delete(load, "dns")
		}
		require.Equal(t, whole, brief)
	})
}

// briefStore is a store of run "r": briefRecords, a second apart from
// 2026-11-20 12:00 UTC in their keys' order, and a result of a kind
// without briefs.
func briefStore(t *testing.T) *Store {
	ctx := context.Background()
	s, at := runStore(t)
	for i, k := range slices.Sorted(maps.Keys(briefRecords)) {
		require.NoError(t, s.WriteResult(ctx, "r", briefKind, k, at.Add(time.Duration(i)*time.Second), briefRecords[k]))
	}
	require.NoError(t, s.WriteResult(ctx, "r", "other", "x", at, map[string]any{"big": 1}))
	return s
}

// TestDatasetBriefs: a dataset's results of a kind with briefs have a
// briefs file beside them, row for row, which a reader of briefs reads
// where it is made as the kind's are now and counts the results file's
// rows; else, and for a reader of records, the results file is read.
// The files' digests cover both.
func TestDatasetBriefs(t *testing.T) {
	ctx := context.Background()
	s := briefStore(t)
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.NoError(t, err)

	whole := []string{briefed["a"], briefed["b"], briefed["c"]}
	briefs := []string{`{"load":{"big":2,"keep":true},"n":1,"z":"\u003cs\u003e"}`, `{"load":null,"n":2}`, `[7]`}
	got, err := readBriefKind(t, dir, (*Store).EachDatasetBrief)
	require.NoError(t, err)
	require.Equal(t, briefs, got, "the briefs, in the results' order; c, no object, is its own")
	got, err = readBriefKind(t, dir, (*Store).EachDatasetResult)
	require.NoError(t, err)
	require.Equal(t, whole, got, "the records whole")

	m := readManifest(t, dir)
	var bf, rf *DatasetFile
	for i, f := range m.Files {
		switch {
		case f.Table == TableBriefs:
			require.Nil(t, bf, "one briefs file: kind other keeps no brief")
			bf = &m.Files[i]
		case f.Table == TableResults && f.Kind == briefKind:
			rf = &m.Files[i]
		}
	}
	require.NotNil(t, bf)
	require.Equal(t, rf.Path, bf.Of)
	require.Equal(t, [2]int64{3, 3}, [2]int64{rf.Rows, bf.Rows})
	require.Equal(t, "_records/briefs/kind=brief-test/run_id=r/day=2026-11-20", path.Dir(bf.Path))

	// What makes a reader of briefs read the records instead.
	edit := func(name string, change func(f *DatasetFile)) {
		t.Helper()
		was := *bf
		change(bf)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, manifestName), b, 0o644))
		got, err := readBriefKind(t, dir, (*Store).EachDatasetBrief)
		require.NoError(t, err)
		require.Equal(t, whole, got, name)
		*bf = was
	}
	edit("briefs of another analysis", func(f *DatasetFile) { f.Brief = "FF00" })
	edit("briefs of fewer rows", func(f *DatasetFile) { f.Rows-- })
	edit("briefs of another file", func(f *DatasetFile) { f.Of = "_records/results/x.jsonl.zst" })
	edit("a dataset before briefs", func(f *DatasetFile) { f.Table = "later" })

	// A briefs file changed since it was written is said to be.
	writeManifest(t, dir, m)
	flipOctet(t, dir, *bf)
	_, err = readBriefKind(t, dir, (*Store).EachDatasetBrief)
	require.ErrorContains(t, err, "changed since it was written")
}

// TestDatasetBriefsUnwritable: an export whose briefs file cannot be
// made (a file where its directory goes) fails in one line naming it and
// leaves the dataset as it was: no file of it stays, temporary or not,
// and the next export, the way clear, writes everything.
func TestDatasetBriefsUnwritable(t *testing.T) {
	ctx := context.Background()
	s := briefStore(t)
	dir := t.TempDir()
	empty, err := Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer empty.Close()
	_, err = empty.ExportDataset(ctx, dir, Filter{}, time.Time{}) // a dataset of nothing yet
	require.NoError(t, err)
	blocker := filepath.Join(dir, "_records", "briefs")
	require.NoError(t, os.MkdirAll(filepath.Dir(blocker), 0o755))
	require.NoError(t, os.WriteFile(blocker, []byte("not a directory"), 0o644))
	files := func() (out []string) {
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(rel))
			}
			return err
		}))
		return out
	}
	_, err = s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.ErrorContains(t, err, "_records/briefs")
	require.Equal(t, []string{"_manifest.json", "_records/briefs"}, files(), "nothing of the export stays")
	d, err := OpenDataset(ctx, dir)
	require.NoError(t, err)
	require.Empty(t, d.Manifest().Files)

	require.NoError(t, os.Remove(blocker))
	x, err := s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, int64(4), x.Results)
	var briefsFiles, resultsFiles int
	for _, f := range files() {
		switch {
		case strings.HasPrefix(f, "_records/briefs/kind=brief-test/"):
			briefsFiles++
		case strings.HasPrefix(f, "_records/results/"):
			resultsFiles++
		}
	}
	require.Equal(t, [2]int{1, 2}, [2]int{briefsFiles, resultsFiles}, "a briefs file beside brief-test's results, none beside other's")
}

// readBriefKind reads the one results file of briefKind of the dataset
// in dir, of run "r", through each (its briefs, or its records).
func readBriefKind(t *testing.T, dir string, each func(*Store, DatasetFile, func(string, []byte) error) error) ([]string, error) {
	r, f := datasetFile(t, dir, briefKind)
	var out []string
	err := each(r, f, func(run string, raw []byte) error {
		require.Equal(t, "r", run)
		out = append(out, string(raw))
		return nil
	})
	return out, err
}

// readManifest is the manifest of the dataset in dir.
func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	require.NoError(t, err)
	var m Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// writeManifest replaces the manifest of the dataset in dir with m.
func writeManifest(t *testing.T, dir string, m Manifest) {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestName), b, 0o644))
}

// flipOctet changes an octet in the middle of the dataset's file f.
func flipOctet(t *testing.T, dir string, f DatasetFile) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	z, err := os.ReadFile(p)
	require.NoError(t, err)
	z[len(z)/2] ^= 1
	require.NoError(t, os.WriteFile(p, z, 0o644))
}

// runStore is a SQLite store of the test's own, closed after it, holding
// a run "r" begun at at.
func runStore(t *testing.T) (s *Store, at time.Time) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	at = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	require.NoError(t, s.BeginRun(context.Background(), Run{ID: "r", Kind: "t", StartedAt: at}))
	return s, at
}

// datasetFile is a store of the test's own with the dataset in dir
// attached, and the dataset's one results file of kind.
func datasetFile(t *testing.T, dir string, kind Kind) (*Store, DatasetFile) {
	t.Helper()
	ctx := context.Background()
	d, err := OpenDataset(ctx, dir)
	require.NoError(t, err)
	r, err := Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.NoError(t, r.Attach(ctx, d))
	files, err := r.DatasetResults(ctx, Filter{}, kind)
	require.NoError(t, err)
	require.Len(t, files, 1)
	return r, files[0]
}

// TestDatasetBriefsAsKept: an export writes the briefs the store keeps,
// made as the kind's are now, without reading their records again (half
// a million page loads' JSON), and makes from its record the brief of a
// result that has none or a stale one: the briefs file is the same.
func TestDatasetBriefsAsKept(t *testing.T) {
	ctx := context.Background()
	s := briefStore(t)
	export := func() []string {
		dir := filepath.Join(t.TempDir(), "ds")
		_, err := s.ExportDataset(ctx, dir, Filter{}, time.Time{})
		require.NoError(t, err)
		out, err := readBriefKind(t, dir, (*Store).EachDatasetBrief)
		require.NoError(t, err)
		return out
	}
	kept := export()
	require.Equal(t, []string{`{"load":{"big":2,"keep":true},"n":1,"z":"\u003cs\u003e"}`, `{"load":null,"n":2}`, `[7]`}, kept)

	_, err := s.db.ExecContext(ctx, `UPDATE results SET brief = NULL`)
	require.NoError(t, err)
	require.Equal(t, kept, export(), "made from the records")
	stale := append([]byte{briefMark, 1, 2, 3, 4, 5, 6, 7, 8}, packRaw([]byte(`{"n":0}`))...)
	_, err = s.db.ExecContext(ctx, `UPDATE results SET brief = ? WHERE kind = ?`, stale, string(briefKind))
	require.NoError(t, err)
	require.Equal(t, kept, export(), "a stale brief is made again")

	// The brief a result keeps is the one written, not its record read
	// again: a kept brief that says otherwise shows it.
	b := briefFor(briefKind)
	_, err = s.db.ExecContext(ctx, `UPDATE results SET brief = ? WHERE task_key = 'a'`, append(bytes.Clone(b.head), packRaw([]byte(`{"n":42}`))...))
	require.NoError(t, err)
	require.Equal(t, append([]string{`{"n":42}`}, kept[1:]...), export())
}

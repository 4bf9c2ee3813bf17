package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

var derivedKind = NewKind("derived-test")

// Two tables derived from derivedKind's results: the records joined
// (what a reader of its briefs has of each, in order), and one whose
// derivation fails on a record that is no object.
func init() {
	Brief(derivedKind, "big")
	Derive(derivedKind, Derived{Table: "joined", Format: "joined v1", New: func(run string) (func([]byte) error, func() ([]byte, error)) {
		b := []byte(run)
		return func(raw []byte) error { b = append(append(b, '|'), raw...); return nil }, func() ([]byte, error) { return b, nil }
	}})
	Derive(derivedKind, Derived{Table: "objects", Format: "objects v1", New: func(string) (func([]byte) error, func() ([]byte, error)) {
		return func(raw []byte) error {
				if !bytes.HasPrefix(raw, []byte("{")) {
					return errors.New("no object")
				}
				return nil
			}, func() ([]byte, error) {
				return []byte("never written"), nil
			}
	}})
}

// TestDatasetDerived: an export writes beside each results file of a
// kind with derived tables a file of each, made from the file's rows
// in order as a reader of its briefs has them, under the table's
// Format; a derivation that failed writes none. A reader is handed the
// file's bytes only for its own Format and where the file was made of
// as many rows as the results file holds; one changed since it was
// written is said to be; an archive reads it back whole.
func TestDatasetDerived(t *testing.T) {
	ctx := context.Background()
	s, at := runStore(t)
	for i, rec := range []any{map[string]any{"n": 1, "big": "x"}, map[string]any{"n": 2}, []int{3}} {
		require.NoError(t, s.WriteResult(ctx, "r", derivedKind, string(rune('a'+i)), at.Add(time.Duration(i)*time.Second), rec))
	}
	dir := filepath.Join(t.TempDir(), "ds")
	x, err := s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, 4, x.Files, "runs, results, briefs, joined")

	m := readManifest(t, dir)
	var rf, jf *DatasetFile
	for i, f := range m.Files {
		switch f.Table {
		case TableResults:
			rf = &m.Files[i]
		case "joined":
			jf = &m.Files[i]
		case "objects":
			t.Fatal("a derivation that failed wrote a file")
		}
	}
	require.NotNil(t, jf)
	require.Equal(t, rf.Path, jf.Of)
	require.Equal(t, "joined v1", jf.Format)
	require.Equal(t, rf.Rows, jf.Rows)
	require.Equal(t, "_records/joined/kind=derived-test/run_id=r/day=2026-11-20", path.Dir(jf.Path))

	read := func(format string) ([]byte, bool, error) {
		t.Helper()
		r, f := datasetFile(t, dir, derivedKind)
		return r.DatasetDerived(ctx, f, "joined", format)
	}
	got, ok, err := read("joined v1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, `r|{"n":1}|{"n":2}|[3]`, string(got), "the briefs, in order; the one that is no object its own")
	_, ok, err = read("joined v2")
	require.NoError(t, err)
	require.False(t, ok, "another format: the rows are read")
	jf.Rows--
	writeManifest(t, dir, m)
	_, ok, err = read("joined v1")
	require.NoError(t, err)
	require.False(t, ok, "made of other rows")
	jf.Rows++
	writeManifest(t, dir, m)
	flipOctet(t, dir, *jf)
	_, _, err = read("joined v1")
	require.ErrorContains(t, err, jf.Path+": changed since it was written")

	// A derived file a killed export left is removed by the next.
	stray := filepath.Join(dir, filepath.FromSlash(path.Dir(jf.Path)), "part-killed-9"+derivedExt)
	require.NoError(t, os.WriteFile(stray, []byte("half"), 0o644))
	x, err = s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, 1, x.Orphans)
	require.NoFileExists(t, stray)

	// An archive reads every file it wrote back before it deletes.
	_, err = s.Archive(ctx, filepath.Join(t.TempDir(), "archive"), at.Add(time.Hour))
	require.NoError(t, err)
	held, err := s.RunResults(ctx, derivedKind)
	require.NoError(t, err)
	require.Empty(t, held)
}

// TestDerivationsEndWithTheirExport: each derived file is made on a
// goroutine of its own beside the writer, which must end with its file,
// written or not: exports that succeed, and exports that fail while a
// results file is open (a file where the next day's briefs directory
// goes), leave nothing running.
func TestDerivationsEndWithTheirExport(t *testing.T) {
	ctx := context.Background()
	s, at := runStore(t)
	for i := range 600 { // two days, each more than a derivation's queue holds
		require.NoError(t, s.WriteResult(ctx, "r", derivedKind, fmt.Sprint(i), at.Add(time.Duration(i)*time.Minute/4), map[string]any{"n": i}))
	}
	for i := range 600 {
		require.NoError(t, s.WriteResult(ctx, "r", derivedKind, fmt.Sprint(600+i), at.Add(24*time.Hour+time.Duration(i)*time.Millisecond), map[string]any{"n": i}))
	}
	empty, err := Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer empty.Close()
	testutil.NoGrowth(t, 3, func() {
		_, err := s.ExportDataset(ctx, filepath.Join(t.TempDir(), "ds"), Filter{}, time.Time{})
		require.NoError(t, err)
		blocked := filepath.Join(t.TempDir(), "ds")
		_, err = empty.ExportDataset(ctx, blocked, Filter{}, time.Time{}) // a dataset of nothing yet
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(blocked, "_records", "briefs", "kind=derived-test", "run_id=r"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(blocked, "_records", "briefs", "kind=derived-test", "run_id=r", "day=2026-11-21"), nil, 0o644))
		_, err = s.ExportDataset(ctx, blocked, Filter{}, time.Time{})
		require.ErrorContains(t, err, "day=2026-11-21")
	})
}

// withSamplesDerived declares d for the test's exports alone.
func withSamplesDerived(t *testing.T, d SamplesDerived) {
	derivedMu.Lock()
	was := samplesDerived
	samplesDerived = append(slices.Clone(was), d)
	derivedMu.Unlock()
	t.Cleanup(func() {
		derivedMu.Lock()
		samplesDerived = was
		derivedMu.Unlock()
	})
}

// TestDatasetSamplesDerived: an export writes beside each samples file
// a file of each samples derivation, made from the rows written to it
// in order and begun once an export with the store (what it read of it,
// here the runs, is in every file), under the table's format; a file
// whose derivation ends in an error has none; one that cannot begin
// fails the export in a line naming it, adding nothing; an archive
// reads every derived file back.
func TestDatasetSamplesDerived(t *testing.T) {
	ctx := context.Background()
	s, at := runStore(t)
	require.NoError(t, s.BeginRun(ctx, Run{ID: "bad", Kind: "t", StartedAt: at}))
	want := map[string][]string{} // a day's keys of run r, in the order written
	for i := range 6 {
		run, start := "r", at.Add(time.Duration(i)*8*time.Hour)
		if i == 5 {
			run = "bad"
		}
		x := &measure.Sample{Task: measure.Task{URL: "udp://t:53", Target: "t", Transport: "udp", Condition: "fresh", Rep: i}, Start: start,
			Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: float64(i)}}, Status: transport.StatusOK}
		require.NoError(t, s.Write(ctx, run, x))
	}
	require.NoError(t, s.EachRow(ctx, Filter{Runs: []string{"r"}}, func(r *Row) error {
		want[day(r.StartedAt)] = append(want[day(r.StartedAt)], r.Key)
		return nil
	}))
	begun, fail := 0, false
	withSamplesDerived(t, SamplesDerived{Table: "keys", Format: "keys v1", Begin: func(ctx context.Context, s *Store) (func(string) (func(*Row), func() ([]byte, error)), error) {
		if begun++; fail {
			return nil, errors.New("no profiles")
		}
		runs, err := s.Runs(ctx)
		if err != nil {
			return nil, err
		}
		return func(run string) (func(*Row), func() ([]byte, error)) {
			b := fmt.Appendf(nil, "%d runs", len(runs))
			return func(r *Row) { b = append(append(b, ' '), r.Key...) }, func() ([]byte, error) {
				if run == "bad" {
					return nil, errors.New("cannot")
				}
				return b, nil
			}
		}, nil
	}})

	fail = true
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.EqualError(t, err, "dataset: the keys of the samples: no profiles")
	require.NoFileExists(t, filepath.Join(dir, manifestName), "nothing added")

	fail, begun = false, 0
	_, err = s.ExportDataset(ctx, dir, Filter{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, 1, begun, "begun once an export, whatever its shards")
	m := readManifest(t, dir)
	r, err := Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	defer r.Close()
	d, err := OpenDataset(ctx, dir)
	require.NoError(t, err)
	require.NoError(t, r.Attach(ctx, d))
	days := map[string]bool{}
	for _, f := range m.Files {
		if f.Table != TableSamples {
			continue
		}
		b, ok, err := r.DatasetDerived(ctx, f, "keys", "keys v1")
		require.NoError(t, err)
		require.Equal(t, f.Run == "r", ok, "%s: a file made, unless its derivation failed", f.Path)
		if !ok {
			continue
		}
		days[f.Day] = true
		require.Equal(t, "2 runs "+strings.Join(want[f.Day], " "), string(b), f.Day)
		k, _ := d.derivedOf(f, "keys", "keys v1")
		require.Equal(t, "_records/keys/run_id=r/day="+f.Day, path.Dir(k.Path))
		require.Equal(t, f.Rows, k.Rows)
		_, ok, err = r.DatasetDerived(ctx, f, "keys", "keys v2")
		require.NoError(t, err)
		require.False(t, ok, "another format: the rows are read")
	}
	require.Len(t, days, len(want), "a file a day")

	_, err = s.Archive(ctx, filepath.Join(t.TempDir(), "archive"), at.Add(72*time.Hour))
	require.NoError(t, err)
	require.NoError(t, s.EachRow(ctx, Filter{Superseded: true}, func(r *Row) error { return fmt.Errorf("sample %s kept", r.Key) }), "every sample archived")
}

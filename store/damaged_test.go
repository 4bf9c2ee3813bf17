package store_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/store"
)

// reads are what a report and an export read of a store with a dataset
// attached: every row, the timings on every reader, the results. Each
// gives its error; a panic anywhere fails the test (EachTiming's readers
// are goroutines: a panic there ends the test binary).
func reads(t *testing.T, s *store.Store) (rows, timings, results error) {
	t.Helper()
	ctx := context.Background()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic reading a damaged dataset: %v", p)
		}
	}()
	rows = s.EachRow(ctx, store.Filter{Superseded: true}, func(*store.Row) error { return nil })
	timings = s.EachTiming(ctx, store.Filter{Superseded: true}, func() func(*store.Row) error {
		return func(*store.Row) error { return nil }
	})
	results = s.Results(ctx, "", testLoad, func(string, []byte) error { return nil })
	return rows, timings, results
}

// TestDamagedDatasetFiles: a dataset whose files were damaged after it
// was written (a truncated copy, octets changed on the way, a file of
// another schema in one's place, one missing) is read to an error that
// names the file, never a panic nor rows made up (a records file read
// whole but for its digest is said to be changed); the intact dataset
// reads whole.
func TestDamagedDatasetFiles(t *testing.T) {
	ctx := context.Background()
	s := campaignStore(t, filepath.Join(t.TempDir(), "s.db"))
	src := t.TempDir()
	_, err := s.ExportDataset(ctx, src, store.Filter{Superseded: true}, time.Time{})
	require.NoError(t, err)
	var m store.Manifest
	b, err := os.ReadFile(filepath.Join(src, "_manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	var samples, results string
	for _, f := range m.Files {
		switch {
		case f.Run != "wild": // a run no other measured again: every read reads it
		case f.Table == store.TableSamples && samples == "":
			samples = f.Path
		case f.Table == store.TableResults && results == "":
			results = f.Path
		}
	}
	require.NotEmpty(t, samples)
	require.NotEmpty(t, results)

	// A Parquet file of other columns: total_ms as text.
	var other bytesFile
	w := parquet.NewGenericWriter[struct {
		TotalMs string `parquet:"total_ms"`
		Key     string `parquet:"key"`
	}](&other)
	_, err = w.Write([]struct {
		TotalMs string `parquet:"total_ms"`
		Key     string `parquet:"key"`
	}{{"fast", "k"}})
	require.NoError(t, err)
	require.NoError(t, w.Close())

	damage := map[string]func(path string, b []byte) []byte{
		"truncated":       func(_ string, b []byte) []byte { return b[:len(b)/2] },
		"empty":           func(string, []byte) []byte { return nil },
		"octets changed":  func(_ string, b []byte) []byte { return flip(b, len(b)/3, 64) },
		"footer changed":  func(_ string, b []byte) []byte { return flip(b, len(b)-40, 32) },
		"another schema":  func(string, []byte) []byte { return other.b },
		"missing":         nil,
		"records damaged": func(_ string, b []byte) []byte { return flip(b, len(b)/2, 16) },
		"records rewritten": func(_ string, b []byte) []byte { // a record added, every octet valid
			dec, err := zstd.NewReader(nil)
			require.NoError(t, err)
			plain, err := dec.DecodeAll(b, nil)
			require.NoError(t, err)
			plain = append(plain, `{"key":"made-up","started_at":"2026-11-20T12:00:00Z","record":{"plt_ms":1}}`+"\n"...)
			enc, err := zstd.NewWriter(nil)
			require.NoError(t, err)
			return enc.EncodeAll(plain, nil)
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
			target := samples
			if strings.HasPrefix(name, "records") {
				target = results
			}
			p := filepath.Join(dir, filepath.FromSlash(target))
			if fn == nil {
				require.NoError(t, os.Remove(p))
			} else {
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(p, fn(p, b), 0o644))
			}
			d, err := store.OpenDataset(ctx, dir)
			require.NoError(t, err, "the manifest is intact")
			empty, err := store.Open(ctx, filepath.Join(t.TempDir(), "e.db"))
			require.NoError(t, err)
			defer empty.Close()
			if err := empty.Attach(ctx, d); err != nil {
				return // refused as it is attached: as good
			}
			rowsErr, timingsErr, resultsErr := reads(t, empty)
			errs := []error{rowsErr, timingsErr}
			if target == results {
				errs = []error{resultsErr}
			}
			for _, err := range errs {
				require.Error(t, err, "a damaged file read as if whole")
				t.Logf("%s: %v", name, err)
				require.Contains(t, err.Error(), target, "the error names the file")
				if target == results {
					require.Contains(t, err.Error(), "changed since it was written: its SHA-256 is not the manifest's")
				}
				require.NotContains(t, err.Error(), "\n")
			}
		})
	}

	d, err := store.OpenDataset(ctx, src)
	require.NoError(t, err)
	whole, err := store.Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	require.NoError(t, err)
	defer whole.Close()
	require.NoError(t, whole.Attach(ctx, d))
	rowsErr, timingsErr, resultsErr := reads(t, whole)
	require.NoError(t, rowsErr)
	require.NoError(t, timingsErr)
	require.NoError(t, resultsErr)
	require.Equal(t, count(t, s, store.Filter{Superseded: true}), count(t, whole, store.Filter{Superseded: true}))
}

// flip inverts n octets of b from at (a copy).
func flip(b []byte, at, n int) []byte {
	out := append([]byte(nil), b...)
	for i := at; i < at+n && i < len(out); i++ {
		out[i] ^= 0xa5
	}
	return out
}

type bytesFile struct{ b []byte }

func (f *bytesFile) Write(p []byte) (int, error) { f.b = append(f.b, p...); return len(p), nil }

package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
)

// memSource is a dataset held in memory, by file name.
type memSource map[string][]byte

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (m memSource) open(_ context.Context, name string) (readFile, error) {
	b, ok := m[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	return memFile{bytes.NewReader(b)}, nil
}

// FuzzDatasetSamplesFile: a samples file of a dataset, whatever its
// octets (a copy cut short, changed on the way from object storage, or
// written by something else), is read to rows or to an error, both
// ways a report and an export read it: no panic, no hang, no allocation
// its size does not bound.
func FuzzDatasetSamplesFile(f *testing.F) {
	var b bytes.Buffer
	w := parquet.NewGenericWriter[Row](&b, fileSchema, parquet.Compression(parquetZstd), parquet.MaxRowsPerRowGroup(3))
	ms := 12.5
	for i := range 7 {
		if _, err := w.Write([]Row{{Key: "k" + string(rune('a'+i)), StartedAt: time.Unix(int64(i), 0), Target: "t", Transport: "doq", Condition: "fresh", Status: "ok", TotalMs: &ms}}); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:b.Len()/2])
	f.Fuzz(func(t *testing.T, file []byte) {
		d := &Dataset{dir: "mem", src: memSource{"f.parquet": file}}
		df := DatasetFile{Path: "f.parquet", Table: TableSamples, Run: "r"}
		runs := map[string]Run{"r": {ID: "r"}}
		rows := 0
		err := d.scanFile(df, make([]Row, 4), runs, func(rs []Row) error { rows += len(rs); return nil })
		if bytes.Equal(file, b.Bytes()) && (err != nil || rows != 7) {
			t.Fatalf("the intact file: %d rows, %v", rows, err)
		}
		_ = d.scanColumns(df, runs, func() bool { return true }, func() func(*Row) error {
			return func(*Row) error { return nil }
		})
	})
}

// FuzzDatasetLine: a records file's line, whatever its octets, gives
// its record (or brief) or an error, never a panic; where it is a JSON
// object as encoding/json would read it, the member read is the one
// encoding/json reads, and it is valid JSON.
func FuzzDatasetLine(f *testing.F) {
	f.Add([]byte(`{"key":"a|b","started_at":"2026-11-20T12:00:00Z","record":{"n":1,"s":"\u003c"}}`))
	f.Add([]byte(`{"record":[1,2],"key":"k"}`))
	f.Add([]byte(`{"key":"k","brief":{}}`))
	f.Add([]byte(`{"key":"k","record":null}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"key":"k","record":{"a":`))
	var r bytes.Reader
	dec := jsontext.NewDecoder(&r)
	f.Fuzz(func(t *testing.T, line []byte) {
		r.Reset(line)
		dec.Reset(&r)
		v, err := lineMember(dec, "record")
		if err != nil {
			return
		}
		if !jsontext.Value(v).IsValid() {
			t.Fatalf("the record read is not valid JSON: %q", v)
		}
		// encoding/json reads the last of a name twice, and invalid
		// UTF-8 as U+FFFD: compared where neither is in the line.
		var rec record
		if !jsontext.Value(line).IsValid() || json.Unmarshal(line, &rec) != nil {
			return
		}
		var a, b bytes.Buffer
		if json.Compact(&a, v) != nil || json.Compact(&b, rec.Record) != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("read %q, encoding/json reads %q", v, rec.Record)
		}
	})
}

// TestDatasetStringsAcrossRowGroups: a samples file's text columns are
// read by their dictionaries' indexes, and each row group has its own
// dictionary: a value's index in one is another value's in the next.
// Every row reads back its own strings, as a null float does its null.
func TestDatasetStringsAcrossRowGroups(t *testing.T) {
	dir := t.TempDir()
	d := &Dataset{dir: dir, src: dirSource(dir)}
	f := &DatasetFile{Path: "run_id=r/vantage=-/day=2026-11-20/part-x.parquet", Table: TableSamples, Run: "r"}
	p, err := d.create(f)
	require.NoError(t, err)
	n := RowGroupRows + 1000
	target := func(i int) string { // a, b, ... then c, a, ...: c takes a's index
		if i < RowGroupRows {
			return []string{"a", "b"}[i%2]
		}
		return []string{"c", "a"}[i%2]
	}
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	for i := range n {
		ms := float64(i)
		r := &Row{RunID: "r", Key: fmt.Sprint(i), StartedAt: at, Target: target(i), Transport: []string{"udp", "doq", "doh3"}[i%3], Status: "ok", Rcode: "NOERROR", TotalMs: &ms}
		if i%7 == 0 {
			r.TotalMs = nil
		}
		require.NoError(t, p.writeRow(r))
	}
	require.NoError(t, p.close(dir))
	got := 0
	err = d.scanColumns(*f, map[string]Run{"r": {ID: "r"}}, func() bool { return true }, func() func(*Row) error {
		return func(r *Row) error {
			i := got
			got++
			if r.Target != target(i) || r.Transport != []string{"udp", "doq", "doh3"}[i%3] || (r.TotalMs == nil) != (i%7 == 0) || r.TotalMs != nil && *r.TotalMs != float64(i) {
				return fmt.Errorf("row %d: %s %s %v", i, r.Target, r.Transport, r.TotalMs)
			}
			return nil
		}
	})
	require.NoError(t, err)
	require.Equal(t, n, got)
}

// TestEscape: a partition's value as Hive writes it: letters, digits,
// '.', '_' and '-' as they are, every other octet as %XX (a name that
// needs none is handed back as it is: an export asks twice a sample).
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "",
		"lab-20261130.run_1": "lab-20261130.run_1",
		"fra 1":              "fra%201",
		"a=b/c":              "a%3Db%2Fc",
		"sin-2%":             "sin-2%25",
		"zürich":             "z%C3%BCrich",
		"../x":               "..%2Fx",
	} {
		require.Equal(t, want, escape(in), "%q", in)
	}
}

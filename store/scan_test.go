package store

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// TestChunkedScanKeepsOrderAndFilter reads a store in ranges of two
// rowids on two connections: every row once, in the order stored, the
// filter applied in each range, and an error from the reader stops it.
func TestChunkedScanKeepsOrderAndFilter(t *testing.T) { chunkedScan(t, openTemp(t)) }

// TestPostgresChunkedScan is it on PostgreSQL, ranges of its primary key.
func TestPostgresChunkedScan(t *testing.T) {
	s, err := Open(context.Background(), testutil.StartPostgres(t))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	chunkedScan(t, s)
}

func chunkedScan(t *testing.T, s *Store) {
	defer func(n int64) { chunkRows = n }(chunkRows)
	chunkRows = 2
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		require.NoError(t, s.BeginRun(ctx, Run{ID: id, Kind: "measure", StartedAt: time.Unix(0, 0)}))
	}
	for i := range 11 {
		run := []string{"a", "b"}[i%2]
		x := &measure.Sample{Task: measure.Task{URL: "udp://t:53", Target: "t", Transport: "udp", Condition: "fresh", Rep: i}, Start: time.Unix(int64(i), 0),
			Measure: &transport.Record{Status: transport.StatusOK, Timing: transport.Timing{TotalMs: float64(i)}}, Status: transport.StatusOK}
		if i%3 == 0 {
			x.Vantage = &measure.Vantage{Name: "fra1", Location: "Frankfurt", ASN: 64500}
		}
		require.NoError(t, s.Write(ctx, run, x))
	}
	read := func(f Filter) (reps []int64, where []string) {
		require.NoError(t, s.EachRow(ctx, f, func(r *Row) error {
			reps = append(reps, int64(*r.TotalMs))
			where = append(where, fmt.Sprint(r.VantageLocation, r.VantageASN))
			return nil
		}))
		// The readers' sinks get the same rows, in any order.
		var sinks [][]string
		require.NoError(t, s.EachTiming(ctx, f, func() func(*Row) error {
			sinks = append(sinks, nil)
			i := len(sinks) - 1
			return func(r *Row) error {
				sinks[i] = append(sinks[i], fmt.Sprint(*r.TotalMs, r.VantageLocation, r.VantageASN))
				return nil
			}
		}))
		var want, got []string
		for i, rep := range reps {
			want = append(want, fmt.Sprint(rep, where[i]))
		}
		for _, sk := range sinks {
			got = append(got, sk...)
		}
		require.ElementsMatch(t, want, got)
		require.Len(t, sinks, 2, "two readers")
		return reps, where
	}
	all, where := read(Filter{})
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, all)
	require.Equal(t, "Frankfurt64500", where[3])
	require.Equal(t, "0", where[4], "a row without a vantage point has none of the last one's")
	b, _ := read(Filter{RunPrefix: "b"})
	require.Equal(t, []int64{1, 3, 5, 7, 9}, b)
	fra, _ := read(Filter{Vantage: "fra1"})
	require.Equal(t, []int64{0, 3, 6, 9}, fra)
	n := 0
	err := s.EachRow(ctx, Filter{}, func(*Row) error {
		if n++; n == 4 {
			return fmt.Errorf("stop")
		}
		return nil
	})
	require.EqualError(t, err, "stop")
}

// TestOrderedScanHandsOnWholeRanges reads a store a batch at a time in
// ranges of three rowids: the batches, read into buffers used again,
// are the rows one range gives, each row's own numbers and the key its
// columns spell (Go's derivedKey, as the samples view's SQL spells it).
func TestOrderedScanHandsOnWholeRanges(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	require.NoError(t, s.BeginRun(ctx, Run{ID: "a", Kind: "measure", StartedAt: time.Unix(0, 0)}))
	for i := range 20 {
		x := &measure.Sample{Task: measure.Task{URL: fmt.Sprintf("https://t%d/dns-query", i%3), Target: "t", Transport: []string{"udp", "doh", "doq"}[i%3], Condition: "fresh", Rep: i, Round: i % 2},
			Start: time.Unix(int64(i), 0), Status: transport.StatusOK,
			Measure: &transport.Record{Status: transport.StatusOK, Timing: transport.Timing{TotalMs: float64(i), HandshakeMs: float64(2 * i)}}}
		if i%4 == 0 {
			x.Vantage = &measure.Vantage{Name: "fra1"}
		}
		require.NoError(t, s.Write(ctx, "a", x))
	}
	var keys []string
	rows, err := s.db.QueryContext(ctx, `SELECT task_key FROM samples ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	whole, err := s.Rows(ctx, "")
	require.NoError(t, err)
	require.Len(t, whole, 20)

	defer func(n int64) { chunkRows = n }(chunkRows)
	chunkRows = 3
	var got []Row
	var sizes []int
	require.NoError(t, s.EachRows(ctx, Filter{}, func(batch []Row) error {
		sizes = append(sizes, len(batch))
		for i := range batch {
			got = append(got, batch[i].Clone())
		}
		return nil
	}))
	require.Equal(t, []int{3, 3, 3, 3, 3, 3, 2}, sizes)
	require.Equal(t, whole, got)
	for i, r := range got {
		require.Equal(t, float64(r.Rep), *r.TotalMs, "row %d", i)
		require.Equal(t, float64(2*r.Rep), *r.HandshakeMs, "row %d", i)
		require.Equal(t, keys[i], r.Key, "row %d", i)
	}
}

// TestScanRefusesMistypedColumns: a value of another type than its
// column's (a store edited by hand) fails SQLite's own reader's scan,
// naming the column, as database/sql's scans failed it.
func TestScanRefusesMistypedColumns(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ set, want string }{
		{`total_us = 'fast'`, "column total_us: text where a number was expected"},
		{`rep = 2.5`, "column rep: a float where an integer was expected"},
		{`tls_resumed = 'yes'`, "column tls_resumed: text where a boolean was expected"},
		{`vantage_asn = 'far'`, "column vantage_asn: text where an integer was expected"},
	} {
		s := openTemp(t)
		require.NoError(t, s.BeginRun(ctx, Run{ID: "a", Kind: "measure", StartedAt: time.Unix(0, 0)}))
		require.NoError(t, s.Write(ctx, "a", &measure.Sample{Task: measure.Task{URL: "udp://t:53", Transport: "udp", Condition: "fresh"}, Start: time.Unix(1, 0),
			Status: transport.StatusOK, Measure: &transport.Record{Status: transport.StatusOK, Timing: transport.Timing{TotalMs: 1}}}))
		_, err := s.db.ExecContext(ctx, `UPDATE sample_cols SET `+tc.set)
		require.NoError(t, err)
		err = s.EachRow(ctx, Filter{}, func(*Row) error { return nil })
		require.ErrorContains(t, err, tc.want, tc.set)
	}
}

// openTemp is a new SQLite store, closed with the test.
func openTemp(t *testing.T) *Store {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestWriteRowsKeepsTheOrder: rows written one at a time and then a
// batch at a time come out in that order, in Parquet (WriteRows writes
// the rows Write holds first) as in CSV, and the batch's memory can be
// used again at once.
func TestWriteRowsKeepsTheOrder(t *testing.T) {
	row := func(rep int64) Row {
		v := float64(rep)
		return Row{RunID: "a", Key: fmt.Sprint(rep), Rep: rep, TotalMs: &v}
	}
	for _, f := range []Format{Parquet, RawCSV} {
		var b bytes.Buffer
		rw := NewRowWriter[Row](&b, f)
		require.NoError(t, rw.Write(row(0)))
		require.NoError(t, rw.Write(row(1)))
		batch := []Row{row(2), row(3)}
		require.NoError(t, rw.WriteRows(batch))
		batch[0], batch[1] = row(8), row(9) // not kept
		require.NoError(t, rw.Write(row(4)))
		require.NoError(t, rw.Close())
		require.Equal(t, 5, rw.N)
		var reps []int64
		if f == Parquet {
			got, err := parquet.Read[Row](bytes.NewReader(b.Bytes()), int64(b.Len()))
			require.NoError(t, err)
			for _, r := range got {
				require.Equal(t, float64(r.Rep), *r.TotalMs)
				reps = append(reps, r.Rep)
			}
		} else {
			recs, err := csv.NewReader(&b).ReadAll()
			require.NoError(t, err)
			col := slices.Index(recs[0], "rep")
			for _, rec := range recs[1:] {
				n, err := strconv.ParseInt(rec[col], 10, 64)
				require.NoError(t, err)
				reps = append(reps, n)
			}
		}
		require.Equal(t, []int64{0, 1, 2, 3, 4}, reps, f)
	}
}

// TestInternedPastItsBound: a column of more distinct values than it
// keeps still reads each value as it is, the kept ones and the others.
func TestInternedPastItsBound(t *testing.T) {
	var in interned
	for round := range 2 {
		for i := range internMax + 100 {
			want := fmt.Sprintf("value-%d", i)
			require.Equal(t, want, in.of([]byte(want)), "round %d", round)
		}
	}
	require.Len(t, in.seen, internMax)
	b := []byte("value-1")
	s := in.of(b)
	b[0] = 'X' // the reader's memory, used again
	require.Equal(t, "value-1", s)
}

// TestResultsKeptAfterTheirRow: results read from SQLite's own memory
// are the caller's to keep, a record stored as it is (codec 0, here
// "{}" and "[]") as well as an unpacked one, however many rows follow.
func TestResultsKeptAfterTheirRow(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run := NewRun("experiment:x", "", nil)
	require.NoError(t, s.BeginRun(ctx, run))
	k := Kind("kept-after-their-row")
	want := []string{"{}", `{"a":"` + strings.Repeat("abc", 200) + `"}`, "[]", `{"b":2}`}
	for i, v := range want {
		require.NoError(t, s.WriteResult(ctx, run.ID, k, strconv.Itoa(i), run.StartedAt.Add(time.Duration(i)), json.RawMessage(v)))
	}
	var got [][]byte
	require.NoError(t, s.Results(ctx, "", k, func(id string, raw []byte) error {
		require.Equal(t, run.ID, id)
		got = append(got, raw)
		return nil
	}))
	require.Len(t, got, len(want))
	for i, raw := range got {
		require.JSONEq(t, want[i], string(raw))
	}
}

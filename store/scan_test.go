package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// TestChunkedScanKeepsOrderAndFilter reads a store in ranges of two
// rowids on two connections: every row once, in the order stored, the
// filter applied in each range, and an error from the reader stops it.
func TestChunkedScanKeepsOrderAndFilter(t *testing.T) {
	defer func(n int64) { chunkRows = n }(chunkRows)
	chunkRows = 2
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer s.Close()
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
	err = s.EachRow(ctx, Filter{}, func(*Row) error {
		if n++; n == 4 {
			return fmt.Errorf("stop")
		}
		return nil
	})
	require.EqualError(t, err, "stop")
}

package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// readPart is the rows inOrder's read gives for part i: i+1 rows, each
// naming its part and place, read after a wait that makes later parts
// end first.
func readPart(ctx context.Context, i int, add func(*Row) error) error {
	select {
	case <-time.After(time.Duration(10-i%10) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	for j := range i + 1 {
		if err := add(&Row{RunID: fmt.Sprint(i), Rep: int64(j)}); err != nil {
			return err
		}
	}
	return nil
}

// TestInOrderHandsPartsOnInOrder: parts read on two goroutines, the
// later ones ending first, reach ordered whole and in the parts' order,
// never more than scanWorkers+1 of them read ahead, and nothing is left
// running.
func TestInOrderHandsPartsOnInOrder(t *testing.T) {
	testutil.NoGrowth(t, 3, func() {
		var started, handed, most atomic.Int32
		var got []string
		err := inOrder(context.Background(), 20, func(ctx context.Context, i int, add func(*Row) error) error {
			ahead := started.Add(1) - handed.Load()
			for m := most.Load(); ahead > m && !most.CompareAndSwap(m, ahead); m = most.Load() {
			}
			return readPart(ctx, i, add)
		}, func(rows []Row) error {
			defer handed.Add(1)
			for _, r := range rows {
				got = append(got, fmt.Sprintf("%s.%d", r.RunID, r.Rep))
			}
			return nil
		})
		require.NoError(t, err)
		var want []string
		for i := range 20 {
			for j := range i + 1 {
				want = append(want, fmt.Sprintf("%d.%d", i, j))
			}
		}
		require.Equal(t, want, got)
		require.LessOrEqual(t, most.Load(), int32(scanWorkers+1), "parts read ahead of the one handed on")
	})
}

// TestInOrderStopsAtTheFirstError: a part that fails ends the scan with
// its error, after the parts before it and none after; so does an
// ordered that fails; and neither leaves a reader running.
func TestInOrderStopsAtTheFirstError(t *testing.T) {
	bad := errors.New("part 5 is damaged")
	testutil.NoGrowth(t, 3, func() {
		var parts []string
		err := inOrder(context.Background(), 40, func(ctx context.Context, i int, add func(*Row) error) error {
			if i == 5 {
				return bad
			}
			return readPart(ctx, i, add)
		}, func(rows []Row) error {
			parts = append(parts, rows[0].RunID)
			return nil
		})
		require.ErrorIs(t, err, bad)
		require.Equal(t, []string{"0", "1", "2", "3", "4"}, parts)

		full := errors.New("disk full")
		calls := 0
		err = inOrder(context.Background(), 40, readPart, func([]Row) error {
			calls++
			if calls == 3 {
				return full
			}
			return nil
		})
		require.ErrorIs(t, err, full)
		require.Equal(t, 3, calls)
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, inOrder(ctx, 40, readPart, func([]Row) error { return nil }), context.Canceled)
}

// TestShareOutRunsEachOnce: every part is done once, by one of
// scanWorkers goroutines, each naming itself; the first error stops
// the rest from starting and is the one returned.
func TestShareOutRunsEachOnce(t *testing.T) {
	var mu sync.Mutex
	done := map[int]int{}
	workers := map[int]bool{}
	require.NoError(t, shareOut(context.Background(), 100, func(_ context.Context, w, i int) error {
		mu.Lock()
		defer mu.Unlock()
		done[i]++
		workers[w] = true
		return nil
	}))
	require.Len(t, done, 100)
	for i, n := range done {
		require.Equal(t, 1, n, "part %d", i)
	}
	for w := range workers {
		require.True(t, w >= 0 && w < scanWorkers, "worker %d", w)
	}

	bad := errors.New("unreachable")
	var started atomic.Int32
	err := shareOut(context.Background(), 1000, func(_ context.Context, _, i int) error {
		started.Add(1)
		if i == 3 {
			return bad
		}
		return nil
	})
	require.ErrorIs(t, err, bad)
	require.Less(t, started.Load(), int32(1000), "the parts after the error were not all started")
}

// TestExportOrder: an export gives each run's samples in the order
// stored; the runs read from their blocks come first, in the order they
// were begun, then the samples of the others in the order stored,
// interleaved as they were written. The same samples as from the rows
// alone, whose order is the store's.
func TestExportOrder(t *testing.T) {
	smallBlocks(t)
	s := openTemp(t)
	ctx := context.Background()
	for _, id := range []string{"b-sealed", "a-sealed", "c-open", "d-open"} {
		require.NoError(t, s.BeginRun(ctx, Run{ID: id, Kind: "measure", StartedAt: time.Unix(0, 0)}))
	}
	// Interleaved writes: c and d write two samples each, fewer than a
	// block, and are not sealed; a and b are.
	runs := []string{"c-open", "b-sealed", "a-sealed", "d-open", "b-sealed", "a-sealed"}
	for i := range 18 {
		require.NoError(t, s.Write(ctx, runs[i%len(runs)], blockSample(i)))
	}
	require.NoError(t, s.Seal(ctx, "a-sealed"))
	require.NoError(t, s.Seal(ctx, "b-sealed"))
	// c and d hold samples beyond no block: their rows are read.
	_, err := s.DB().ExecContext(ctx, `DELETE FROM sample_blocks WHERE run IN (SELECT n FROM runs WHERE id IN ('c-open', 'd-open'))`)
	require.NoError(t, err)

	order := func() (out []string) {
		require.NoError(t, s.EachRow(ctx, Filter{}, func(r *Row) error {
			out = append(out, fmt.Sprintf("%s/%d", r.RunID, r.Rep))
			return nil
		}))
		return out
	}
	got := order()
	var want []string
	for _, run := range []string{"b-sealed", "a-sealed"} { // begun in this order
		for i := range 18 {
			if runs[i%len(runs)] == run {
				want = append(want, fmt.Sprintf("%s/%d", run, i))
			}
		}
	}
	for i := range 18 {
		if run := runs[i%len(runs)]; run == "c-open" || run == "d-open" {
			want = append(want, fmt.Sprintf("%s/%d", run, i))
		}
	}
	require.Equal(t, want, got)

	_, err = s.DB().ExecContext(ctx, `DELETE FROM sample_blocks`)
	require.NoError(t, err)
	rows := order()
	var stored []string
	for i := range 18 {
		stored = append(stored, fmt.Sprintf("%s/%d", runs[i%len(runs)], i))
	}
	require.Equal(t, stored, rows, "from the rows alone: the order stored")
	require.ElementsMatch(t, rows, got)
	require.False(t, slices.Equal(rows, got))
}

// TestBlocksOfAnotherVersionSealedAgain: blocks a doxlab before this one
// wrote (version 2: the report's columns alone) are not read, by the
// report or an export, and count as unsealed; store seal replaces them
// with this version's, which both read again, giving the rows' rows.
func TestBlocksOfAnotherVersionSealedAgain(t *testing.T) {
	s := writtenRun(t, 10)
	ctx := context.Background()
	require.NoError(t, s.Seal(ctx, "a"))
	_, err := s.DB().ExecContext(ctx, `UPDATE sample_blocks SET version = 2`)
	require.NoError(t, err)
	// Were a block of version 2 read as this version's, it would fail:
	// its octets are not this version's columns.
	_, err = s.DB().ExecContext(ctx, `UPDATE sample_blocks SET z = ?`, []byte{42})
	require.NoError(t, err)
	n, err := s.unsealed(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, n, "blocks of another version seal nothing")
	rows := timingTexts(t, s, Filter{})
	exportsAsTheRows(t, s, Filter{}, "version 2 blocks")

	require.NoError(t, s.Seal(ctx, "a"))
	var lo, hi int
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT min(version), max(version) FROM sample_blocks`).Scan(&lo, &hi))
	require.Equal(t, []int{blockVersion, blockVersion}, []int{lo, hi}, "every block made again")
	n, err = s.unsealed(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.ElementsMatch(t, rows, timingTexts(t, s, Filter{}))
	exportsAsTheRows(t, s, Filter{}, "sealed again")
}

package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestBlocksAreTheRowsWhateverTheWrites: whatever order writes, seals
// and deletions come in (runs written in turns of random lengths, tails
// past the most a scan reads from rows, seals of one run or all, a
// sample deleted in SQL), every scan a report makes (all runs, one run,
// a prefix, a vantage point, the samples after a number) gives from its
// blocks and tails exactly what it gives from the rows, on SQLite.
func TestBlocksAreTheRowsWhateverTheWrites(t *testing.T) {
	for seed := range testutil.Seeds(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { blocksModel(t, openTemp(t), seed) })
	}
}

// TestPostgresBlocksAreTheRowsWhateverTheWrites is it on PostgreSQL.
func TestPostgresBlocksAreTheRowsWhateverTheWrites(t *testing.T) {
	s := openPostgres(t)
	for seed := range testutil.Seeds(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { blocksModel(t, s, 100+seed) })
	}
}

func blocksModel(t *testing.T, s *Store, seed uint64) {
	smallBlocks(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	runs := []string{fmt.Sprintf("r%d-a", seed), fmt.Sprintf("r%d-b", seed), fmt.Sprintf("r%d-c", seed)}
	for _, id := range runs {
		require.NoError(t, s.BeginRun(ctx, Run{ID: id, Kind: "measure", StartedAt: time.Unix(0, 0)}))
	}
	check := func(step string) {
		t.Helper()
		var last int64
		require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM sample_cols`).Scan(&last))
		filters := []Filter{{}, {Runs: runs[:1]}, {Runs: runs[1:]}, {RunPrefix: runs[2]}, {Vantage: "fra1"}, {After: last / 2}, {After: last}}
		// A summary's read-on from where a run's blocks begin or end.
		var begin, end int64
		require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT COALESCE(max(after_id), 0), COALESCE(max(last_id), 0) FROM sample_blocks`).Scan(&begin, &end))
		for _, at := range []int64{begin, end} {
			if at > 0 {
				filters = append(filters, Filter{After: at}, Filter{After: at, Runs: runs[:1]})
			}
		}
		for _, f := range filters {
			want := fromRows(t, s, f)
			require.ElementsMatch(t, want, timingTexts(t, s, f), "seed %d, %s, %+v", seed, step, f)
			exportsAsTheRows(t, s, f, fmt.Sprintf("seed %d, %s, %+v", seed, step, f))
		}
	}
	i := 0
	for step := range 12 {
		switch op := rng.IntN(10); {
		case op < 6: // a turn of writes to one run, up to past the tail
			run := runs[rng.IntN(len(runs))]
			for range rng.IntN(3 * maxTail / 2) {
				require.NoError(t, s.Write(ctx, run, blockSample(i)))
				i++
			}
		case op < 8:
			require.NoError(t, s.Seal(ctx, runs[rng.IntN(len(runs))]))
		case op < 9:
			require.NoError(t, s.SealAll(ctx, rng.IntN(2) == 0))
		default: // a sample deleted under its block
			_, err := s.DB().ExecContext(ctx, `DELETE FROM sample_cols WHERE id = (SELECT min(id) FROM sample_cols)`)
			require.NoError(t, err)
		}
		check(fmt.Sprintf("step %d", step))
	}
}

// exportsAsTheRows: what an export reads (EachRows: every column, in
// order) from blocks and tails is what it reads from the rows alone,
// each run's samples in the order stored.
func exportsAsTheRows(t *testing.T, s *Store, f Filter, msg string) {
	t.Helper()
	read := func() (all []string, byRun map[string][]string) {
		byRun = map[string][]string{}
		require.NoError(t, s.EachRows(context.Background(), f, func(rows []Row) error {
			for i := range rows {
				text := rowText(&rows[i])
				all = append(all, text)
				byRun[rows[i].RunID] = append(byRun[rows[i].RunID], text)
			}
			return nil
		}))
		return all, byRun
	}
	got, gotByRun := read()
	var want []string
	var wantByRun map[string][]string
	rowsOnly(t, s, func() { want, wantByRun = read() })
	require.ElementsMatch(t, want, got, msg)
	require.Equal(t, wantByRun, gotByRun, msg)
}

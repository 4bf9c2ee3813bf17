package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// summariesTable holds what an analysis keeps of each run's samples
// (schema 12): a report of a year's campaign reads each sample once, when
// it first reports its run, and the run's cells from here after that, as
// OONI's pipeline keeps aggregates beside its measurements. A summary is
// the analysis' own encoding (kind names it; the analysis keeps its
// version in it), of the
// samples the run held when it was made: how many, and the largest
// number among them. The samples stay the truth: a summary that no
// longer counts them all is made again (RunSamples).
const summariesTable = `CREATE TABLE IF NOT EXISTS summaries (
		run BIGINT NOT NULL,
		kind TEXT NOT NULL,
		last_id BIGINT NOT NULL,
		samples BIGINT NOT NULL,
		z BLOB NOT NULL,
		PRIMARY KEY (run, kind)
	)`

// Held is what the store holds of one run's samples, as a summary names
// it: how many there are, and the largest sample number among them (what
// a summary brought up to date would read on from).
type Held struct{ Samples, Last int64 }

// Summary is what an analysis kept of a run's samples: Data, made when
// the run held Held.
type Summary struct {
	Held
	Data []byte
}

// RunSamples is how many samples the store holds of each run, by run ID
// (its own rows, not a dataset's), counted on the runs' index. A summary
// of a run is whole while the run holds as many samples as it counts: a
// sample added moves the count, on PostgreSQL one whose lower number
// commits late too, and samples leave a run only when archived, which
// takes its summaries.
func (s *Store) RunSamples(ctx context.Context) (map[string]int64, error) {
	runs, err := s.dbRuns(ctx)
	if err != nil {
		return nil, err
	}
	if !s.postgres {
		return s.runSamplesSQLite(ctx, runs)
	}
	byNumber := make(map[int64]string, len(runs))
	for _, r := range runs {
		byNumber[r.number] = r.ID
	}
	// Without max(id), which costs SQLite as much again.
	rows, err := s.db.QueryContext(ctx, `SELECT run, count(*) FROM sample_cols GROUP BY run`)
	if err != nil {
		return nil, fmt.Errorf("store: counting the runs' samples: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var n, count int64
		if err := rows.Scan(&n, &count); err != nil {
			return nil, err
		}
		if id, ok := byNumber[n]; ok {
			out[id] = count
		}
	}
	return out, rows.Err()
}

// RunSamplesOf is RunSamples for an analysis that keeps summaries of
// kind: on SQLite, where the store holds as many samples in all as those
// summaries count (counted on the table's pages, not row by row: 0.1 s
// at ten million samples where RunSamples takes 1 s of CPU), each run
// with one holds what it counts and the others none, and it says so
// without counting any run. That holds because a summary never counts
// more than its run holds: samples leave a run only when archived, and
// each batch the archive deletes takes the run's summaries in its
// transaction. So a sample added anywhere, or a run without a summary,
// leaves the total above the sum. Both are read in one snapshot.
// PostgreSQL counts every run, as RunSamples (one parallel scan).
func (s *Store) RunSamplesOf(ctx context.Context, kind string) (map[string]int64, error) {
	if !s.postgres {
		if held, ok, err := s.summarizedCounts(ctx, kind); err != nil || ok {
			return held, err
		}
	}
	return s.RunSamples(ctx)
}

// summarizedCounts is what kind's summaries count of each run, with ok
// when the store holds that many samples in all.
func (s *Store) summarizedCounts(ctx context.Context, kind string) (held map[string]int64, ok bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback() //nolint:errcheck // read only
	rows, err := tx.QueryContext(ctx, `SELECT r.id, m.samples FROM summaries m JOIN runs r ON r.n = m.run WHERE m.kind = ?`, kind)
	if err != nil {
		return nil, false, fmt.Errorf("store: reading summaries: %w", err)
	}
	defer rows.Close()
	held = map[string]int64{}
	var sum int64
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, false, err
		}
		if n > 0 { // as RunSamples: a run without samples is not in it
			held[id] = n
		}
		sum += n
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if sum == 0 {
		// None kept (the first report, or the cells' projection
		// changed): every run is counted anyway; counting the table
		// too read its index twice (2 s of a cold report at ten
		// million samples, its pages not yet in memory).
		return nil, false, nil
	}
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sample_cols`).Scan(&total); err != nil {
		return nil, false, fmt.Errorf("store: counting the samples: %w", err)
	}
	return held, total == sum, nil
}

// runSamplesSQLite is RunSamples on SQLite: a count a run, the runs
// shared out to scanWorkers store readers at once. Counting walks the
// runs' index, a row at a time on one core (0.8 s of a report made again
// at ten million samples); PostgreSQL counts them all in one parallel
// scan. Each count is of its reader's snapshot, as a count is of its
// moment: a summary is checked against the run again before it is kept.
func (s *Store) runSamplesSQLite(ctx context.Context, runs []Run) (map[string]int64, error) {
	counts := make([]int64, len(runs))
	errs := make([]error, scanWorkers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(scanWorkers, len(runs)) {
		wg.Go(func() {
			c, err := s.reader()
			if err != nil {
				errs[w] = err
				return
			}
			defer s.release(c)
			for i := int(next.Add(1) - 1); i < len(runs) && errs[w] == nil; i = int(next.Add(1) - 1) {
				errs[w] = func() error {
					if err := ctx.Err(); err != nil {
						return err
					}
					rows, err := c.Query(`SELECT count(*) FROM sample_cols WHERE run = ?`, runs[i].number)
					if err != nil {
						return err
					}
					defer rows.Close()
					if rows.Next() {
						counts[i] = rows.Value(0).Int64()
					}
					return rows.Err()
				}()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("store: counting the runs' samples: %w", err)
	}
	out := map[string]int64{}
	for i, r := range runs {
		if counts[i] > 0 { // as GROUP BY run: a run without samples is not in it
			out[r.ID] = counts[i]
		}
	}
	return out, nil
}

// Summaries are the summaries of kind the store keeps, by run ID.
func (s *Store) Summaries(ctx context.Context, kind string) (map[string]Summary, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT r.id, m.last_id, m.samples, m.z FROM summaries m JOIN runs r ON r.n = m.run WHERE m.kind = ?`), kind)
	if err != nil {
		return nil, fmt.Errorf("store: reading summaries: %w", err)
	}
	defer rows.Close()
	out := map[string]Summary{}
	for rows.Next() {
		var id string
		var m Summary
		var z []byte
		if err := rows.Scan(&id, &m.Last, &m.Samples, &z); err != nil {
			return nil, err
		}
		if m.Data, err = unpackRaw(z); err != nil {
			return nil, fmt.Errorf("store: the summary %s of run %s: %w", kind, id, err)
		}
		out[id] = m
	}
	return out, rows.Err()
}

// PutSummary keeps a summary of kind for run, in place of any before it.
func (s *Store) PutSummary(ctx context.Context, kind, run string, m Summary) error {
	res, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO summaries (run, kind, last_id, samples, z) SELECT n, ?, ?, ?, ? FROM runs WHERE id = ?
		ON CONFLICT (run, kind) DO UPDATE SET last_id = excluded.last_id, samples = excluded.samples, z = excluded.z`), kind, m.Last, m.Samples, packRaw(m.Data), run)
	if err != nil {
		return fmt.Errorf("store: keeping the summary %s of run %s: %w", kind, run, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("store: keeping the summary %s: %w: %s", kind, ErrNoRun, run)
	}
	return nil
}

// Keeps is the runs f keeps, by ID: its prefix or run, less the runs
// measured again unless it keeps them.
func (s *Store) Keeps(ctx context.Context, f Filter) (func(runID string) bool, error) {
	return s.keepRun(ctx, f)
}

// RunHeld is what the store holds of one run's samples now.
func (s *Store) RunHeld(ctx context.Context, run string) (Held, error) {
	var h Held
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT count(*), COALESCE(max(id), 0) FROM sample_cols WHERE run = (SELECT n FROM runs WHERE id = ?)`), run).Scan(&h.Samples, &h.Last)
	return h, err
}

// EachStoredTiming is EachTiming of the store's own samples, not an
// attached dataset's: a run's summary is of those.
func (s *Store) EachStoredTiming(ctx context.Context, f Filter, newSink func() func(r *Row) error) error {
	return s.scanOf(ctx, f, timingColumns, nil, newSink, false)
}

// DatasetSamples are the samples files of the attached dataset that f
// keeps (none without one), each its own summary's unit: a file is
// never rewritten, and the manifest names it with its digest.
func (s *Store) DatasetSamples(ctx context.Context, f Filter) ([]DatasetFile, error) {
	if s.archive == nil {
		return nil, nil
	}
	keep, err := s.keepRun(ctx, f)
	if err != nil {
		return nil, err
	}
	return s.archive.timingFiles(keep, f.Vantage), nil
}

// EachDatasetTiming reads the timing columns of files of the attached
// dataset, on its readers at once, each file's rows a reader reads into
// the sink newSink makes for that reader and file.
func (s *Store) EachDatasetTiming(ctx context.Context, files []DatasetFile, newSink func(f DatasetFile) func(*Row) error) error {
	if s.archive == nil || len(files) == 0 {
		return nil
	}
	runs, err := s.runsByID(ctx)
	if err != nil {
		return err
	}
	var mu sync.Mutex // the readers make their sinks at once
	return s.archive.scanTimings(files, runs, func(_ int, f DatasetFile) func(*Row) error {
		mu.Lock()
		defer mu.Unlock()
		return newSink(f)
	})
}

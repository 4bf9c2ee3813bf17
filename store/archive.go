package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// archiveBatch is how many keys one DELETE names.
const archiveBatch = 500

// Archive moves what started before before from the store to the dataset
// in dir: it exports every run's samples and results of that time
// (superseded runs' too: nothing is lost), reads the new files back,
// and only then deletes what the dataset holds from the store and gives
// the space back (SQLite's VACUUM; PostgreSQL's VACUUM leaves it to the
// tables to reuse). The runs themselves stay in the store, where a
// campaign still measuring writes beside them. A report of the store
// with the dataset attached is the report before.
//
// A resumed run measures again what was archived of it: archive the
// rounds that are done.
func (s *Store) Archive(ctx context.Context, dir string, before time.Time) (*Exported, error) {
	if before.IsZero() {
		return nil, fmt.Errorf("archive: no time to archive before")
	}
	w, err := openWriter(dir)
	if err != nil {
		return nil, err
	}
	defer w.unlock()
	w.archive = true
	if err := w.export(ctx, s, Filter{Superseded: true}, before); err != nil {
		w.abort()
		return nil, err
	}
	if err := w.commit(); err != nil {
		return nil, err
	}
	for _, f := range w.added {
		if err := w.d.check(f); err != nil {
			return nil, fmt.Errorf("archive: nothing deleted from the store: %w", err)
		}
	}
	if !w.Exported.Moved() {
		// Nothing to delete, and no VACUUM: on a store of ten million
		// samples it rewrote 6 GB to give back nothing.
		return &w.Exported, nil
	}
	if err := s.deleteArchived(ctx, &w.Exported); err != nil {
		return nil, fmt.Errorf("archive: the dataset is whole, but deleting from the store failed (archive again to finish): %w", err)
	}
	vacuum := `VACUUM`
	if _, err := s.db.ExecContext(ctx, vacuum); err != nil {
		return nil, fmt.Errorf("archive: %s: %w", vacuum, err)
	}
	return &w.Exported, nil
}

// check reads a file back: its rows as the manifest says.
func (d *Dataset) check(f DatasetFile) error {
	var n int64
	if f.Format != "" { // derived from rows read back themselves: whole is enough
		_, err := d.readDerived(context.Background(), f)
		return err
	}
	if f.Table == TableSamples {
		file, err := d.src.open(context.Background(), f.Path)
		if err != nil {
			return err
		}
		defer file.Close()
		pf, err := parquet.OpenFile(file, file.Size())
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		n = pf.NumRows()
	} else if err := d.eachLine(f, func([]byte) error { n++; return nil }); err != nil {
		return err
	}
	if n != f.Rows {
		return fmt.Errorf("%s: %d rows read back, %d written", f.Path, n, f.Rows)
	}
	return nil
}

// deleteArchived deletes what the dataset holds of the store, a batch of
// keys a transaction: the records whole before the rows they refer to.
func (s *Store) deleteArchived(ctx context.Context, x *Exported) error {
	// del deletes run's keys a batch at a time (query's %s is where the
	// batch's keys go), each batch's transaction taking the run's
	// summaries with it (dropSummaries): no summary ever counts more
	// than its run holds, even one a report kept between two batches or
	// an archive cut short (RunSamplesOf relies on it).
	del := func(run, query string, args []any, keys []any) error {
		for len(keys) > 0 {
			n := min(len(keys), archiveBatch)
			q := fmt.Sprintf(query, strings.Repeat("?,", n-1)+"?")
			a := append(append([]any{}, args...), keys[:n]...)
			if err := s.InTx(ctx, func(tx *sql.Tx) error {
				if err := s.dropSummaries(ctx, tx, run); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, s.rebind(q), a...)
				return err
			}); err != nil {
				return err
			}
			keys = keys[n:]
		}
		return nil
	}
	for run, keys := range x.samples {
		// By their keys' hashes: the keys are the run's own, and in a
		// run each hash is one sample's.
		hashes := make([]any, len(keys))
		for i, k := range keys {
			hashes[i] = keyHash(k)
		}
		// Its blocks first: until sealed again below, the run is read
		// from its rows, never from blocks of samples it no longer holds.
		if _, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM sample_blocks WHERE run = (SELECT n FROM runs WHERE id = ?)`), run); err != nil {
			return err
		}
		if err := del(run, `DELETE FROM sample_cols WHERE run = (SELECT n FROM runs WHERE id = ?) AND k IN (%s)`, []any{run}, hashes); err != nil {
			return err
		}
		s.sealRun(ctx, run, true)
	}
	for rk, keys := range x.results {
		if err := del(rk[0], `DELETE FROM results WHERE run_id = ? AND kind = ? AND task_key IN (%s)`, []any{rk[0], rk[1]}, anys(keys)); err != nil {
			return err
		}
	}
	return nil
}

// dropSummaries deletes run's summaries in tx, which no longer count
// what it holds once some of it is archived. What a summary is checked
// against (how many samples or results the run holds, and the latest)
// cannot always tell: results archived, then as many stored late,
// started before the latest, left a summary that matched the run and
// counted the archived ones twice (with the dataset's) and the late
// ones not.
func (s *Store) dropSummaries(ctx context.Context, tx *sql.Tx, run string) error {
	_, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM summaries WHERE run = (SELECT n FROM runs WHERE id = ?)`), run)
	return err
}

func anys(keys []string) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

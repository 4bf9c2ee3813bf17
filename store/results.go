package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// eachRaw runs a query that selects run_id and a packed record (z), and
// hands f each row with its record unpacked.
func (s *Store) eachRaw(ctx context.Context, query string, args []any, f func(runID string, raw []byte) error) error {
	return s.eachPacked(ctx, query, args, func(id string, z []byte, borrowed bool) error { return handRaw(id, z, borrowed, f) })
}

// eachPacked runs a query that selects run_id and a packed record (z),
// and hands f each row as selected; borrowed says z is memory the next
// row takes.
func (s *Store) eachPacked(ctx context.Context, query string, args []any, f func(runID string, z []byte, borrowed bool) error) error {
	if !s.postgres {
		return s.eachPackedSQLite(ctx, query, args, f)
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var z []byte
		if err := rows.Scan(&id, &z); err != nil {
			return err
		}
		if err := f(id, z, false); err != nil {
			return err
		}
	}
	return rows.Err()
}

// handRaw hands f run id's record z unpacked. borrowed says z is memory
// the next row takes, which a record kept as it is (codec 0) must leave.
// A brief's column (StoredBriefs) is handed as its record would be.
func handRaw(id string, z []byte, borrowed bool, f func(runID string, raw []byte) error) error {
	z = unbrief(z)
	raw, err := unpackRaw(z)
	if err != nil {
		return fmt.Errorf("store: run %s: %w", id, err)
	}
	if borrowed && z[0] == codecPlain {
		raw = bytes.Clone(raw)
	}
	return f(id, raw)
}

// Unpack is the record a result's packed column holds (StoredPacked):
// its brief or its record whole, as StoredBriefs would hand it.
func Unpack(z []byte) ([]byte, error) {
	return unpackRaw(unbrief(z))
}

// eachPackedSQLite is eachPacked on one of the store's SQLite readers:
// a record is handed in SQLite's memory, not first copied out of it
// under the driver's locks (500,000 page loads: a tenth of a report's
// first read).
func (s *Store) eachPackedSQLite(ctx context.Context, query string, args []any, f func(runID string, z []byte, borrowed bool) error) error {
	c, err := s.reader()
	if err != nil {
		return err
	}
	defer s.release(c)
	rows, err := c.Query(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids interned
	for n := 1; rows.Next(); n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := f(ids.of(rows.Value(0).Bytes()), rows.Value(1).Bytes(), true); err != nil {
			return err
		}
	}
	return rows.Err()
}

// runPrefix selects the runs whose ID starts with a prefix; its arguments
// are the prefix's length in characters and the prefix.
const runPrefix = `substr(run_id, 1, ?) = ?`

// Kind names a type of result in the results table (e.g. "hol-query").
// The package that writes a kind declares it once with NewKind, so
// export and the report find every kind there is.
type Kind string

var (
	kindsMu sync.Mutex
	kinds   []Kind
)

// NewKind declares a result kind; a name declared twice panics, at init.
func NewKind(name string) Kind {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	k := Kind(name)
	if slices.Contains(kinds, k) {
		panic("store: result kind " + name + " declared twice")
	}
	kinds = append(kinds, k)
	return k
}

// Kinds lists the declared result kinds, in the order declared.
func Kinds() []Kind {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	return slices.Clone(kinds)
}

// WriteResult stores one result without a table of its own, whole, as
// JSON, under its kind and a key unique within the run.
func (s *Store) WriteResult(ctx context.Context, runID string, kind Kind, key string, started time.Time, v any) error {
	return s.WriteResultTx(ctx, s.db, runID, kind, key, started, v)
}

// WriteResultTx is WriteResult in a transaction.
func (s *Store) WriteResultTx(ctx context.Context, ex Execer, runID string, kind Kind, key string, started time.Time, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = ex.ExecContext(ctx, s.rebind(`INSERT INTO results (run_id, kind, task_key, started_at, z, brief) VALUES (?,?,?,?,?,?)`),
		runID, kind, key, storedTime(started), packRaw(raw), writeBrief(kind, raw))
	if err != nil {
		return fmt.Errorf("store: writing %s %s: %w", kind, key, err)
	}
	return nil
}

// WriteResultOnceTx stores a result in tx unless its run holds one of
// its kind and key already, and says whether it did: a task a job queue
// delivered twice is stored once.
func (s *Store) WriteResultOnceTx(ctx context.Context, ex Execer, runID string, kind Kind, key string, started time.Time, v any) (bool, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return false, err
	}
	res, err := ex.ExecContext(ctx, s.rebind(`INSERT INTO results (run_id, kind, task_key, started_at, z, brief) VALUES (?,?,?,?,?,?)
		ON CONFLICT (run_id, kind, task_key) DO NOTHING`),
		runID, kind, key, storedTime(started), packRaw(raw), writeBrief(kind, raw))
	if err != nil {
		return false, fmt.Errorf("store: writing %s %s: %w", kind, key, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Results returns the stored results of one kind from the runs whose ID
// starts with prefix, in the order they were taken, for f to decode;
// superseded runs are left out.
func (s *Store) Results(ctx context.Context, prefix string, kind Kind, f func(runID string, raw []byte) error) error {
	return s.FilteredResults(ctx, Filter{RunPrefix: prefix}, kind, f)
}

// FilteredResults is Results for the runs a filter selects (its prefix,
// its runs by ID, and whether superseded runs are in).
func (s *Store) FilteredResults(ctx context.Context, flt Filter, kind Kind, f func(runID string, raw []byte) error) error {
	if s.archive != nil {
		keep, err := s.keepRun(ctx, flt)
		if err != nil {
			return err
		}
		if err := s.archive.results(kind, keep, f); err != nil {
			return err
		}
	}
	q, args := `SELECT run_id, z FROM results WHERE kind = ? AND `+runPrefix, []any{kind, utf8.RuneCountInString(flt.RunPrefix), flt.RunPrefix}
	if flt.Runs != nil {
		q += ` AND run_id IN (NULL` + strings.Repeat(`, ?`, len(flt.Runs)) + `)`
		for _, id := range flt.Runs {
			args = append(args, id)
		}
	}
	if !flt.Superseded {
		not, more, err := s.notSuperseded(ctx)
		if err != nil {
			return err
		}
		q, args = q+not, append(args, more...)
	}
	return s.eachRaw(ctx, q+` ORDER BY started_at, run_id, task_key`, args, f)
}

// RunResults is what the store holds of each run's results of kind,
// by run ID (its own rows, not an attached dataset's): how many, and the
// latest start among them (Held.Last, in nanoseconds since 1970). A
// summary of a run's results is whole while the run holds as many as it
// counts, as RunSamples is for samples.
func (s *Store) RunResults(ctx context.Context, kind Kind) (map[string]Held, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT run_id, count(*), max(started_at) FROM results WHERE kind = ? GROUP BY run_id`), kind)
	if err != nil {
		return nil, fmt.Errorf("store: counting the runs' %s results: %w", kind, err)
	}
	defer rows.Close()
	out := map[string]Held{}
	for rows.Next() {
		var id, last string
		var h Held
		if err := rows.Scan(&id, &h.Samples, &last); err != nil {
			return nil, err
		}
		t, err := time.Parse(time.RFC3339Nano, last)
		if err != nil {
			return nil, fmt.Errorf("store: run %s: a result's start %q: %w", id, last, err)
		}
		h.Last = t.UnixNano()
		out[id] = h
	}
	return out, rows.Err()
}

// StoredResults is Results of the store's own rows of the runs named
// (not an attached dataset's), run by run in the order of their IDs,
// each run's in the order they were taken; with after (nanoseconds
// since 1970) not 0, only those that started after it.
func (s *Store) StoredResults(ctx context.Context, runs []string, kind Kind, after int64, f func(runID string, raw []byte) error) error {
	if len(runs) == 0 {
		return nil
	}
	q, args := storedQuery(`z`, nil, runs, kind, after)
	return s.eachRaw(ctx, q, args, f)
}

// storedQuery selects run_id and col (with its arguments args) of the
// results of kind of runs, as StoredResults hands them. Run by run, the
// results' index (kind, run, start) gives them in order as they are
// read, but for ties in their start: in the order taken across runs,
// the engine sorted them all before the first came (half a million page
// loads: seconds in which nothing was decoded).
func storedQuery(col string, args []any, runs []string, kind Kind, after int64) (string, []any) {
	args = append(args, kind)
	for _, r := range runs {
		args = append(args, r)
	}
	q := `SELECT run_id, ` + col + ` FROM results WHERE kind = ? AND run_id IN (?` + strings.Repeat(", ?", len(runs)-1) + `)`
	if after != 0 {
		q, args = q+` AND started_at > ?`, append(args, storedTime(time.Unix(0, after)))
	}
	return q + ` ORDER BY run_id, started_at, task_key`, args
}

// DatasetResults are the attached dataset's results files of kind of
// the runs f keeps (none without one), in the dataset's order, each its
// own summary's unit: a file is never rewritten, and the manifest names
// it with its digest and rows.
func (s *Store) DatasetResults(ctx context.Context, f Filter, kind Kind) ([]DatasetFile, error) {
	if s.archive == nil {
		return nil, nil
	}
	keep, err := s.keepRun(ctx, f)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(s.archive.files(TableResults, kind), func(df DatasetFile) bool { return !keep(df.Run) }), nil
}

// EachDatasetResult hands fn the records of one of the attached
// dataset's results files, in the file's order.
func (s *Store) EachDatasetResult(df DatasetFile, fn func(runID string, raw []byte) error) error {
	if s.archive == nil {
		return nil
	}
	return s.archive.eachMember(df, "record", fn)
}

// EachDatasetBrief is EachDatasetResult for an analysis that reads only
// what df's kind's briefs keep (StoredBriefs): the lines of df's briefs
// file where the dataset holds one made as the kind's briefs are now,
// of as many rows, else df's records.
func (s *Store) EachDatasetBrief(df DatasetFile, fn func(runID string, raw []byte) error) error {
	if s.archive == nil {
		return nil
	}
	if bf, ok := s.archive.briefsOf(df); ok {
		return s.archive.eachMember(bf, "brief", fn)
	}
	return s.EachDatasetResult(df, fn)
}

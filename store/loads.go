package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/doxlab/doxlab/web"
)

// WriteLoad stores one page load of the web experiment, whole.
func (s *Store) WriteLoad(ctx context.Context, runID string, x *web.Sample) error {
	raw, err := json.Marshal(x)
	if err != nil {
		return err
	}
	var plt, fcp, dns sql.NullFloat64
	if x.Status == "ok" {
		plt = sql.NullFloat64{Float64: x.PLTMs, Valid: true}
		fcp = sql.NullFloat64{Float64: x.FCPMs, Valid: x.FCPMs > 0}
		dns = sql.NullFloat64{Float64: x.DNSMs, Valid: true}
	}
	_, err = s.db.ExecContext(ctx, s.rebind(`INSERT INTO page_loads (run_id, task_key, started_at, profile, page, transport, stub_state, h3, dns_mode, rep,
		status, plt_ms, fcp_ms, dns_ms, h3_0rtt, h3_resumed, raw) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`),
		runID, x.Key(), x.Start.UTC().Format(time.RFC3339Nano), x.Profile, x.Page, x.Transport, x.StubState, x.H3, x.DNSMode, x.Rep,
		x.Status, plt, fcp, dns, x.H3Used0RTT, x.H3Resumed, string(raw))
	if err != nil {
		return fmt.Errorf("store: writing page load %s: %w", x.Key(), err)
	}
	return nil
}

// LoadsDone returns the task keys of the page loads a run has stored.
func (s *Store) LoadsDone(ctx context.Context, runID string) (map[string]bool, error) {
	return s.keys(ctx, "page_loads", runID)
}

// Loads returns the stored page loads of the runs whose ID starts with
// prefix (all when empty), whole, in the order they were measured.
func (s *Store) Loads(ctx context.Context, prefix string) ([]*web.Sample, error) {
	var out []*web.Sample
	err := s.eachLoad(ctx, prefix, func(_ string, x *web.Sample) error {
		out = append(out, x)
		return nil
	})
	return out, err
}

// eachLoad decodes the page loads of the runs whose ID starts with prefix,
// in the order they were measured.
func (s *Store) eachLoad(ctx context.Context, prefix string, f func(runID string, x *web.Sample) error) error {
	return s.eachRaw(ctx, `SELECT run_id, raw FROM page_loads WHERE `+runPrefix+` ORDER BY started_at, run_id, task_key`,
		[]any{utf8.RuneCountInString(prefix), prefix}, func(id, raw string) error {
			x := new(web.Sample)
			if err := json.Unmarshal([]byte(raw), x); err != nil {
				return fmt.Errorf("store: page load in run %s: %w", id, err)
			}
			return f(id, x)
		})
}

// eachRaw runs a query that selects run_id and raw, and hands f each row.
func (s *Store) eachRaw(ctx context.Context, query string, args []any, f func(runID, raw string) error) error {
	rows, err := s.db.QueryContext(ctx, s.rebind(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return err
		}
		if err := f(id, raw); err != nil {
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
	_, err = ex.ExecContext(ctx, s.rebind(`INSERT INTO results (run_id, kind, task_key, started_at, raw) VALUES (?,?,?,?,?)`),
		runID, kind, key, started.UTC().Format(time.RFC3339Nano), string(raw))
	if err != nil {
		return fmt.Errorf("store: writing %s %s: %w", kind, key, err)
	}
	return nil
}

// Results returns the stored results of one kind from the runs whose ID
// starts with prefix, in the order they were taken, for f to decode.
func (s *Store) Results(ctx context.Context, prefix string, kind Kind, f func(runID string, raw []byte) error) error {
	return s.eachRaw(ctx, `SELECT run_id, raw FROM results WHERE kind = ? AND `+runPrefix+` ORDER BY started_at, run_id, task_key`,
		[]any{kind, utf8.RuneCountInString(prefix), prefix}, func(id, raw string) error { return f(id, []byte(raw)) })
}

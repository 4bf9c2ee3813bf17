package store

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// A run is superseded when it was measured again (an experiment's run
// whose link check failed is, once): its samples and results stay in the
// store, whole, but analysis and export read the run that replaced it.
// The mark is a result of the new run, so nothing already stored changes
// and the old run's rows keep their ID.

// KindSupersedes is the mark a run that replaced another holds: its key
// is the replaced run's ID.
var KindSupersedes = NewKind("supersedes")

// Supersession is one run measured again.
type Supersession struct {
	Run string    `json:"run"` // the run measured again
	By  string    `json:"by"`  // the run that replaced it
	Why string    `json:"why"` // "link check after: RTT error p99 1.4 ms"
	At  time.Time `json:"at"`
}

// Supersede marks run old as replaced by run by, for why.
func (s *Store) Supersede(ctx context.Context, old, by, why string) error {
	at := time.Now().UTC()
	return s.WriteResult(ctx, by, KindSupersedes, old, at, Supersession{Run: old, By: by, Why: why, At: at})
}

// Supersessions are the runs whose ID starts with prefix that were
// measured again, in the order they were.
func (s *Store) Supersessions(ctx context.Context, prefix string) ([]Supersession, error) {
	var out []Supersession
	err := s.eachRaw(ctx, `SELECT run_id, z FROM results WHERE kind = ? AND substr(task_key, 1, ?) = ? ORDER BY started_at, task_key`,
		[]any{KindSupersedes, utf8.RuneCountInString(prefix), prefix}, func(_ string, raw []byte) error {
			var x Supersession
			if err := json.Unmarshal(raw, &x); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	if err != nil || s.archive == nil {
		return out, err
	}
	held := make(map[string]bool, len(out))
	for _, x := range out {
		held[x.Run] = true
	}
	err = s.archive.results(KindSupersedes, func(string) bool { return true }, func(_ string, raw []byte) error {
		var x Supersession
		if err := json.Unmarshal(raw, &x); err != nil {
			return err
		}
		if strings.HasPrefix(x.Run, prefix) && !held[x.Run] {
			held[x.Run] = true
			out = append(out, x)
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b Supersession) int { return a.At.Compare(b.At) })
	return out, err
}

// keepRun is what a filter keeps of the runs a dataset holds: those of
// its prefix, and not superseded unless it says so.
func (s *Store) keepRun(ctx context.Context, f Filter) (func(runID string) bool, error) {
	gone := map[string]bool{}
	if !f.Superseded {
		all, err := s.Supersessions(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, x := range all {
			gone[x.Run] = true
		}
	}
	return func(id string) bool {
		return strings.HasPrefix(id, f.RunPrefix) && (f.Runs == nil || slices.Contains(f.Runs, id)) && !gone[id]
	}, nil
}

// SupersededBy is the run that replaced run id, or "" when none did.
func (s *Store) SupersededBy(ctx context.Context, id string) (string, error) {
	all, err := s.Supersessions(ctx, id)
	for _, x := range all {
		if x.Run == id {
			return x.By, err
		}
	}
	return "", err
}

// Superseders maps each superseded run to the run that replaced it.
func (s *Store) Superseders(ctx context.Context) (map[string]string, error) {
	all, err := s.Supersessions(ctx, "")
	by := make(map[string]string, len(all))
	for _, x := range all {
		by[x.Run] = x.By
	}
	return by, err
}

// notSuperseded is SQL that leaves out the superseded runs, with its
// arguments: nothing when there are none, as in most stores.
func (s *Store) notSuperseded(ctx context.Context) (string, []any, error) {
	all, err := s.Supersessions(ctx, "")
	if err != nil || len(all) == 0 {
		return "", nil, err
	}
	args := make([]any, len(all))
	for i, x := range all {
		args[i] = x.Run
	}
	return ` AND run_id NOT IN (` + strings.Repeat("?,", len(all)-1) + `?)`, args, nil
}

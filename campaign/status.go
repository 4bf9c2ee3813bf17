package campaign

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/doxlab/doxlab/internal/printable"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/doxlab/doxlab/store"
)

// VantageStatus is how far one vantage point of a planned campaign is.
type VantageStatus struct {
	Vantage    string    `json:"vantage"`
	Planned    int       `json:"planned"`    // tasks
	Stored     int       `json:"stored"`     // samples stored, each task once
	Running    int       `json:"running"`    // jobs taken by a worker now (or by one that died, until rescued)
	Waiting    int       `json:"waiting"`    // jobs not yet taken, or waiting to be retried
	Failed     int       `json:"failed"`     // jobs River gave up on or cancelled: tasks without a sample
	Retried    int       `json:"retried"`    // jobs delivered more than once
	Duplicates int       `json:"duplicates"` // deliveries whose sample was stored already
	Workers    int       `json:"workers"`    // workers that took its jobs
	Last       time.Time `json:"last_sample,omitzero"`
}

// Status is a planned campaign's progress.
type Status struct {
	Run      string          `json:"run"`
	Name     string          `json:"name"`
	Planned  time.Time       `json:"planned_at"`
	Vantages []VantageStatus `json:"vantages"`
	Every    time.Duration   `json:"every,omitempty"`
	Rounds   []RoundStatus   `json:"rounds,omitempty"` // of a campaign in rounds
}

// RoundStatus is how far one round of a campaign in rounds is, over all
// its vantage points.
type RoundStatus struct {
	Round   int       `json:"round"` // from 1
	Due     time.Time `json:"due"`
	Planned int       `json:"planned"` // tasks
	Done    int       `json:"done"`    // jobs completed: tasks stored
	Running int       `json:"running"`
	Waiting int       `json:"waiting"` // not yet due, or due and not taken
	Failed  int       `json:"failed"`
}

// State says where a round stands at now, every being the time between
// rounds: scheduled (not yet due), running, done, late (due, and no
// worker has taken a task of it), or missed (not done when the next
// round fell due: its samples are not all from its own slot).
func (r RoundStatus) State(now time.Time, every time.Duration) string {
	switch {
	case r.Done == r.Planned:
		return "done"
	case now.Before(r.Due):
		return "scheduled"
	case !now.Before(r.Due.Add(every)):
		return "missed"
	case r.Running > 0 || r.Done > 0 || r.Failed > 0:
		return "running"
	}
	return "late"
}

// LatestPlanned is the ID of the campaign planned last, or of the page
// campaign measured here last, "" if none.
func LatestPlanned(ctx context.Context, st *store.Store) (string, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range slices.Backward(runs) {
		var p Plan
		if r.Kind == Kind && json.Unmarshal(r.Spec, &p) == nil && (len(p.Vantages) > 0 || p.Here > 0) {
			return r.ID, nil
		}
	}
	return "", nil
}

// HereVantage is the vantage name of a campaign measured on one machine.
const HereVantage = "here"

// GetStatus reads a planned campaign's progress per vantage point: the
// samples stored, and the queue's jobs by state; or a page campaign's
// measured here (doxlab campaign run): its loads stored of its tasks.
func GetStatus(ctx context.Context, st *store.Store, runID string) (*Status, error) {
	if s, err := hereStatus(ctx, st, runID); s != nil || err != nil {
		return s, err
	}
	if err := needPostgres(st); err != nil {
		return nil, err
	}
	p, _, err := loadPlan(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	r, _ := st.Run(ctx, runID)
	s := &Status{Run: runID, Name: p.Name, Planned: r.StartedAt}
	by := map[string]*VantageStatus{}
	for _, v := range p.Vantages {
		s.Vantages = append(s.Vantages, VantageStatus{Vantage: v.Name, Planned: v.Tasks})
	}
	for i := range s.Vantages {
		by[s.Vantages[i].Vantage] = &s.Vantages[i]
	}
	if p.Rounds > 0 {
		s.Every = p.Every
		planned := 0
		for _, v := range p.Vantages {
			planned += v.Tasks
		}
		for r := 1; r <= p.Rounds; r++ {
			s.Rounds = append(s.Rounds, RoundStatus{Round: r, Due: p.due(s.Planned, r), Planned: planned / p.Rounds})
		}
	}
	db := st.DB()
	// DNS samples, and page loads (keyed VANTAGE/task).
	err = eachRow(ctx, db, `SELECT vantage, count(*), max(started_at) FROM (
			SELECT vantage, started_at FROM samples WHERE run_id = $1
			UNION ALL SELECT split_part(task_key, '/', 1), started_at FROM results WHERE run_id = $1 AND kind = $2) s
		GROUP BY vantage`, []any{runID, PageLoads}, func(rows *sql.Rows) error {
		var v, last string
		var n int
		if err := rows.Scan(&v, &n, &last); err != nil {
			return err
		}
		if vs := by[v]; vs != nil {
			vs.Stored += n
			vs.Last, _ = time.Parse(time.RFC3339Nano, last)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, db, `SELECT args->>'vantage', state, count(*), count(*) FILTER (WHERE attempt > 1)
		FROM river_job WHERE kind = $1 AND args->>'run' = $2 GROUP BY 1, 2`, []any{jobKind, runID}, func(rows *sql.Rows) error {
		var v, state string
		var n, retried int
		if err := rows.Scan(&v, &state, &n, &retried); err != nil {
			return err
		}
		vs := by[v]
		if vs == nil {
			return nil
		}
		vs.Retried += retried
		tally(state, n, nil, &vs.Running, &vs.Waiting, &vs.Failed)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, db, `SELECT args->>'vantage', count(DISTINCT w) FROM river_job, unnest(attempted_by) w
		WHERE kind = $1 AND args->>'run' = $2 GROUP BY 1`, []any{jobKind, runID}, func(rows *sql.Rows) error {
		var v string
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			return err
		}
		if vs := by[v]; vs != nil {
			vs.Workers = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(s.Rounds) > 0 {
		err = eachRow(ctx, db, `SELECT (args->'task'->>'round')::int, state, count(*)
			FROM river_job WHERE kind = $1 AND args->>'run' = $2 GROUP BY 1, 2`, []any{jobKind, runID}, func(rows *sql.Rows) error {
			var r, n int
			var state string
			if err := rows.Scan(&r, &state, &n); err != nil {
				return err
			}
			if r < 1 || r > len(s.Rounds) {
				return nil
			}
			rs := &s.Rounds[r-1]
			tally(state, n, &rs.Done, &rs.Running, &rs.Waiting, &rs.Failed)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err = st.FilteredResults(ctx, store.Filter{Runs: []string{runID}}, Duplicates, func(_ string, raw []byte) error {
		var x struct{ Vantage struct{ Name string } }
		if json.Unmarshal(raw, &x) == nil {
			if vs := by[x.Vantage.Name]; vs != nil {
				vs.Duplicates++
			}
		}
		return nil
	})
	return s, err
}

// hereStatus is the status of a page campaign measured on one machine,
// nil if runID is not one.
func hereStatus(ctx context.Context, st *store.Store, runID string) (*Status, error) {
	r, err := st.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	var p Plan
	if r.Kind != Kind || json.Unmarshal(r.Spec, &p) != nil || len(p.Vantages) > 0 || p.Here == 0 {
		return nil, nil
	}
	v := VantageStatus{Vantage: HereVantage, Planned: p.Here}
	err = st.FilteredResults(ctx, store.Filter{Runs: []string{runID}}, PageLoads, func(_ string, raw []byte) error {
		var x struct{ Start time.Time }
		if json.Unmarshal(raw, &x) == nil && x.Start.After(v.Last) {
			v.Last = x.Start
		}
		v.Stored++
		return nil
	})
	v.Waiting = max(v.Planned-v.Stored, 0)
	return &Status{Run: runID, Name: p.Name, Planned: r.StartedAt, Vantages: []VantageStatus{v}}, err
}

// tally adds n jobs in River's state to the count it belongs to: done
// (completed; nil when not counted), running, waiting (not yet taken, or
// to be retried) or failed (given up on, or cancelled).
func tally(state string, n int, done, running, waiting, failed *int) {
	switch state {
	case "completed":
		if done != nil {
			*done += n
		}
	case "running":
		*running += n
	case "available", "pending", "retryable", "scheduled":
		*waiting += n
	case "discarded", "cancelled":
		*failed += n
	}
}

// Write prints the status as a table.
func (s *Status) Write(w io.Writer, now time.Time) error {
	fmt.Fprintf(w, "campaign %s, run %s, planned %s\n", printable.String(s.Name), printable.String(s.Run), s.Planned.Format(time.RFC3339))
	width := len("vantage")
	for _, v := range s.Vantages {
		width = max(width, len(printable.String(v.Vantage)))
	}
	line := func(name, planned, stored, done, running, waiting, failed, retried, dups, workers, last string) {
		fmt.Fprintf(w, "%-*s %8s %8s %7s %8s %8s %7s %8s %11s %8s  %s\n", width, name, planned, stored, done, running, waiting, failed, retried, dups, workers, last)
	}
	line("vantage", "planned", "stored", "done", "running", "waiting", "failed", "retried", "duplicates", "workers", "last sample")
	var total VantageStatus
	d := strconv.Itoa
	for _, v := range s.Vantages {
		last := "-"
		if !v.Last.IsZero() {
			last = now.Sub(v.Last).Round(time.Second).String() + " ago"
		}
		line(printable.String(v.Vantage), d(v.Planned), d(v.Stored), share(v.Stored, v.Planned), d(v.Running), d(v.Waiting), d(v.Failed), d(v.Retried), d(v.Duplicates), d(v.Workers), last)
		total.Planned += v.Planned
		total.Stored += v.Stored
		total.Running += v.Running
		total.Waiting += v.Waiting
		total.Failed += v.Failed
		total.Retried += v.Retried
		total.Duplicates += v.Duplicates
	}
	line("all", d(total.Planned), d(total.Stored), share(total.Stored, total.Planned), d(total.Running), d(total.Waiting), d(total.Failed), d(total.Retried), d(total.Duplicates), "", "")
	if len(s.Rounds) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%d rounds, every %v:\n", len(s.Rounds), s.Every)
	fmt.Fprintf(w, "%5s  %-20s %8s %8s %7s %8s %8s %7s  %s\n", "round", "due", "planned", "stored", "done", "running", "waiting", "failed", "state")
	missed := 0
	for _, r := range s.Rounds {
		state := r.State(now, s.Every)
		if state == "missed" {
			missed++
		}
		fmt.Fprintf(w, "%5d  %-20s %8d %8d %7s %8d %8d %7d  %s\n", r.Round, r.Due.UTC().Format(time.RFC3339), r.Planned, r.Done, share(r.Done, r.Planned), r.Running, r.Waiting, r.Failed, state)
	}
	if missed > 0 {
		fmt.Fprintf(w, "%d round(s) missed: not done when the next fell due (start more workers, or check that they run)\n", missed)
	}
	return nil
}

func share(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// Cancel stops a planned campaign: its jobs not yet taken are cancelled
// at once, and those under way are asked to stop (a worker gives such a
// task back unstored). Samples already stored stay. It returns how many
// of each it cancelled.
func Cancel(ctx context.Context, st *store.Store, runID string) (waiting, running int, err error) {
	if err := needPostgres(st); err != nil {
		return 0, 0, err
	}
	if _, _, err := loadPlan(ctx, st, runID); err != nil {
		return 0, 0, err
	}
	// One statement for the waiting jobs, which may be millions; River's
	// own cancel, one job at a time, for the few under way, so their
	// workers hear of it.
	res, err := st.DB().ExecContext(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE kind = $1 AND args->>'run' = $2 AND state IN ('available', 'pending', 'retryable', 'scheduled')`, jobKind, runID)
	if err != nil {
		return 0, 0, err
	}
	n, _ := res.RowsAffected()
	var ids []int64
	err = eachRow(ctx, st.DB(), `SELECT id FROM river_job WHERE kind = $1 AND args->>'run' = $2 AND state = 'running'`, []any{jobKind, runID},
		func(rows *sql.Rows) error {
			var id int64
			err := rows.Scan(&id)
			ids = append(ids, id)
			return err
		})
	if err != nil {
		return int(n), 0, err
	}
	client, err := river.NewClient(driver(st), &river.Config{})
	if err != nil {
		return int(n), 0, err
	}
	for _, id := range ids {
		if _, err := client.JobCancel(ctx, id); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return int(n), running, err
		}
		running++
	}
	return int(n), running, nil
}

// eachRow runs a query and hands each row to f.
func eachRow(ctx context.Context, db *sql.DB, query string, args []any, f func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

package campaign

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doxlab/doxlab/internal/printable"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivertype"

	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// Worker takes one vantage point's jobs, from every campaign planned
// with that vantage point, until its context ends (or, with Drain, until
// the vantage point's queue is empty).
type Worker struct {
	Store   *store.Store
	Vantage string
	// ID names the worker in the jobs it takes; default
	// VANTAGE/HOSTNAME/PID.
	ID string
	// Concurrency is how many tasks it measures at once; default 4.
	Concurrency int
	// Address is the vantage point's address as the resolvers see it (a
	// public address behind NAT); default the local address of each
	// measured connection.
	Address string
	// RescueAfter is how long a job may stay taken before River hands it
	// to another worker: its taker is presumed dead. Default 2 minutes;
	// every worker of a store should use the same.
	RescueAfter time.Duration
	// Drain returns once the vantage point's queue holds no job that is
	// waiting or taken, instead of waiting for more.
	Drain bool
	// Log hears of each sample stored and each problem; default none.
	Log io.Writer
	// Stored, if set, is told of each sample stored.
	Stored func(*measure.Sample)
	// Pages configures the loader of page-load tasks (its Log is the
	// worker's).
	Pages PageLoaderConfig
	// Loaded, if set, is told of each page load stored.
	Loaded func(*PageLoad)

	mu    sync.Mutex
	plans map[string]*workPlan
	pages pages // the loader of page-load tasks, one task at a time
	pace  pacer
	stats WorkerStats
}

// WorkerStats is what a worker did.
type WorkerStats struct {
	Stored     int // samples stored
	Duplicates int // deliveries whose sample was stored already
	Cancelled  int // tasks given back unfinished, for another delivery
	// Refused are jobs failed for good, with their reason in the queue:
	// not in their stored plan, or a sample that cannot be stored.
	Refused int
}

// workPlan is a plan with what measuring its tasks needs.
type workPlan struct {
	*Plan
	id      string                // planID of the run's spec as stored
	tasks   map[measure.Task]bool // this vantage point's tasks, as the plan makes them
	spec    measure.Spec
	vantage measure.Vantage
}

// Stats is what the worker did so far.
func (w *Worker) Stats() WorkerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Run works until ctx ends, or with Drain until the queue is empty. On
// the way out, tasks under way are finished for a few seconds, then given
// back.
func (w *Worker) Run(ctx context.Context) error {
	if err := needPostgres(w.Store); err != nil {
		return err
	}
	if err := measure.CheckVantageName(w.Vantage); err != nil {
		return err
	}
	if w.Log == nil {
		w.Log = io.Discard
	}
	if w.ID == "" {
		// A process's second worker is named apart: a worker takes back
		// at its start what its ID holds (takeBack).
		host, _ := os.Hostname()
		w.ID = fmt.Sprintf("%s/%s/%d", w.Vantage, host, os.Getpid())
		if n := workersStarted.Add(1); n > 1 {
			w.ID += fmt.Sprintf(".%d", n)
		}
	}
	w.Concurrency = max(w.Concurrency, 1)
	if w.RescueAfter <= 0 {
		w.RescueAfter = 2 * time.Minute
	}
	w.plans = map[string]*workPlan{}
	w.pages.cfg = w.Pages
	w.pages.cfg.Log = w.Log
	defer w.pages.close()
	// A worker that starts while the database restarts waits for it.
	notify := func(err error, wait time.Duration) {
		fmt.Fprintf(w.Log, "worker %s: %v; trying again in %v\n", w.ID, err, wait)
	}
	if err := store.Retry(ctx, func() error { return migrate(ctx, w.Store) }, notify); err != nil {
		return err
	}
	// What this worker's ID held when its run before was killed is taken
	// back before the first fetch, not left to River's rescuer.
	err := store.Retry(ctx, func() error {
		n, err := takeBack(ctx, w.Store, QueueName(w.Vantage), w.ID)
		if n > 0 {
			fmt.Fprintf(w.Log, "worker %s: took back %d jobs its run before held when it stopped\n", w.ID, n)
		}
		return err
	}, notify)
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &jobWorker{w: w})
	client, err := river.NewClient(driver(w.Store), &river.Config{
		ID:     w.ID,
		Queues: map[string]river.QueueConfig{QueueName(w.Vantage): {MaxWorkers: w.Concurrency}},
		// A worker that finishes a job fetches the next at once (River's
		// default waits up to 100 ms, which a task of a millisecond on a
		// near resolver would spend mostly waiting); the poll only finds
		// new plans and retries.
		FetchCooldown:        river.FetchCooldownMin,
		FetchPollInterval:    time.Second,
		RescueStuckJobsAfter: w.RescueAfter,
		JobTimeout:           w.RescueAfter, // a job's own is its plan's task budget (jobWorker.Timeout)
		RetryPolicy:          retryPolicy{},
		Workers:              workers,
		Logger:               slog.New(slog.NewTextHandler(w.Log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := store.Retry(ctx, func() error { return client.Start(runCtx) }, notify); err != nil {
		return err
	}
	fmt.Fprintf(w.Log, "worker %s: taking jobs of vantage point %s, %d at a time\n", w.ID, w.Vantage, w.Concurrency)
	if w.Drain {
		go func() {
			for runCtx.Err() == nil {
				if n, err := pending(runCtx, w.Store, QueueName(w.Vantage)); err == nil && n == 0 {
					stop()
					return
				}
				select {
				case <-time.After(time.Second):
				case <-runCtx.Done():
				}
			}
		}()
	}
	<-runCtx.Done()
	// Finish what is under way for a moment; what is not done by then is
	// given back (its jobs are retried), not stored half-measured.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := client.Stop(sctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		client.StopAndCancel(cctx)
	}
	if ctx.Err() != nil && !w.Drain {
		return nil // stopped as asked
	}
	return ctx.Err()
}

// takeBack makes the jobs of queue that a worker of this ID holds
// (River's running state, taken last by id) available again, and says
// how many: its run before was killed holding them, since a worker ID is
// one process at a time. A supervisor's restart (a container's, whose
// default ID, VANTAGE/HOST/1, is the same each time, or --id) then runs
// them again at once, where River's rescuer would wait --rescue-after
// and up to its 30 s tick. As the rescuer does, a job whose cancel was
// asked is cancelled and one out of attempts discarded, and the attempt
// is recorded among the job's errors.
func takeBack(ctx context.Context, st *store.Store, queue, id string) (int64, error) {
	res, err := st.DB().ExecContext(ctx, `WITH held AS (
			SELECT id, CASE WHEN metadata ? 'cancel_attempted_at' THEN 'cancelled'
				WHEN attempt >= max_attempts THEN 'discarded' ELSE 'available' END AS next
			FROM river_job WHERE state = 'running' AND queue = $1 AND attempted_by[cardinality(attempted_by)] = $2
			FOR UPDATE
		)
		UPDATE river_job j SET state = held.next::river_job_state,
			finalized_at = CASE WHEN held.next = 'available' THEN NULL ELSE now() END,
			scheduled_at = CASE WHEN held.next = 'available' THEN now() ELSE j.scheduled_at END,
			errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt, 'trace', '',
				'error', 'taken back by worker ' || $2 || ' at its start: its run before stopped holding it'))
		FROM held WHERE j.id = held.id`, queue, id)
	if err != nil {
		return 0, fmt.Errorf("taking back this worker's jobs: %w", err)
	}
	return res.RowsAffected()
}

// workersStarted counts the workers this process named by default.
var workersStarted atomic.Int64

// pending counts a queue's jobs that are waiting or taken.
func pending(ctx context.Context, st *store.Store, queue string) (int, error) {
	var n int
	err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`, queue).Scan(&n)
	return n, err
}

// plan returns the plan of a run, read once.
func (w *Worker) plan(ctx context.Context, runID string) (*workPlan, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.plans[runID]; ok {
		return p, nil
	}
	p, id, err := loadPlan(ctx, w.Store, runID)
	if err != nil {
		return nil, err
	}
	wp := &workPlan{Plan: p, id: id, tasks: map[measure.Task]bool{}}
	if wp.spec, err = p.spec(); err != nil {
		return nil, fmt.Errorf("%w: run %s: %w", errNoPlan, runID, err)
	}
	for _, v := range p.Vantages {
		if v.Name != w.Vantage {
			continue
		}
		wp.vantage = v.Vantage
		tasks, err := p.tasks(v.Targets)
		if err != nil {
			return nil, fmt.Errorf("%w: run %s: %w", errNoPlan, runID, err)
		}
		for _, t := range tasks {
			wp.tasks[t] = true
		}
	}
	if wp.vantage.Name == "" {
		return nil, fmt.Errorf("%w: run %s has no vantage point %s", errNoPlan, runID, w.Vantage)
	}
	if p.taskBudget() > w.RescueAfter {
		fmt.Fprintf(w.Log, "worker %s: warning: a task of run %s may take %v, longer than --rescue-after %v: slow tasks will be delivered twice (and stored once)\n",
			w.ID, runID, p.taskBudget(), w.RescueAfter)
	}
	w.plans[runID] = wp
	return wp, nil
}

// jobWorker measures one job.
type jobWorker struct {
	river.WorkerDefaults[measureArgs]
	w *Worker
}

// Timeout is the plan's task budget plus the longest the worker's pacing
// can hold a task before it starts: the rate's wait must not eat the
// measurement's time (at rate 0.05 every job timed out and was retried).
func (j *jobWorker) Timeout(job *river.Job[measureArgs]) time.Duration {
	if p, err := j.w.plan(context.Background(), job.Args.Run); err == nil {
		budget := p.taskBudget()
		if job.Args.Task.Page != "" {
			// Page loads take turns at the worker's one browser.
			budget *= time.Duration(j.w.Concurrency)
		}
		return budget + paceAllowance(p.Rate, j.w.Concurrency)
	}
	return 0
}

// paceAllowance is how long a task may wait for its turn at rate tasks a
// second with concurrency taken at once.
func paceAllowance(rate float64, concurrency int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(concurrency+1) / rate * float64(time.Second))
}

func (j *jobWorker) Work(ctx context.Context, job *river.Job[measureArgs]) error {
	w := j.w
	p, err := w.plan(ctx, job.Args.Run)
	if errors.Is(err, errNoPlan) {
		return river.JobCancel(err) // a plan that cannot be measured will not become one
	}
	if err != nil {
		return err // the store away: tried again
	}
	// Only what the stored plan holds is measured: a job or plan edited
	// in the database could otherwise aim a worker anywhere.
	switch {
	case job.Args.Plan != "" && job.Args.Plan != p.id:
		return w.refuse(fmt.Errorf("job %d: the plan of run %s changed after its jobs were queued", job.ID, job.Args.Run))
	case job.Args.Vantage != w.Vantage || !p.tasks[job.Args.Task]:
		return w.refuse(fmt.Errorf("job %d: its task (%s %s) is not in run %s's plan for vantage point %s", job.ID,
			printable.String(job.Args.Task.URL), job.Args.Task.Condition, job.Args.Run, w.Vantage))
	}
	if err := w.pace.wait(ctx, p.Rate); err != nil {
		return err
	}
	if job.Args.Task.Page != "" {
		return w.workPage(ctx, p, job)
	}
	sample := p.spec.Measure(ctx, job.Args.Task)
	if ctx.Err() != nil {
		// Stopped or timed out mid-task: give it back rather than store
		// a sample the interruption distorted.
		w.count(func(s *WorkerStats) { s.Cancelled++ })
		return ctx.Err()
	}
	v := p.vantage
	v.Address = w.Address
	if v.Address == "" && sample.Measure != nil {
		if host, _, err := net.SplitHostPort(sample.Measure.Conn.LocalAddr); err == nil {
			v.Address = host
		}
	}
	sample.Vantage = &v
	sample.Job = w.jobInfo(job)
	stored, err := w.commit(ctx, job, store.SampleKey(sample), sample.Start, sample, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return w.Store.WriteOnce(ctx, tx, job.Args.Run, sample)
	})
	if err != nil {
		return err
	}
	if stored {
		w.Store.Wrote(ctx, job.Args.Run)
	}
	if stored && w.Stored != nil {
		w.Stored(sample)
	}
	return nil
}

// workPage measures a page-load task with the worker's loader and
// stores it as a DNS sample is stored: once, with its job's completion.
func (w *Worker) workPage(ctx context.Context, p *workPlan, job *river.Job[measureArgs]) error {
	o, err := p.pageOptions(p.spec)
	if err != nil {
		return err
	}
	x, err := w.pages.load(ctx, job.Args.Task, o)
	if ctx.Err() != nil {
		w.count(func(s *WorkerStats) { s.Cancelled++ })
		return ctx.Err()
	}
	if err != nil {
		fmt.Fprintf(w.Log, "worker %s: job %d: the page loader failed: %v\n", w.ID, job.ID, err)
		return err // the loader broke, not the page: tried again
	}
	v := p.vantage
	v.Address = w.Address
	x.Vantage, x.Job, x.Resolver = &v, w.jobInfo(job), p.Notes[x.Target]
	stored, err := w.commit(ctx, job, x.Key(), x.Start, x, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return w.Store.WriteResultOnceTx(ctx, tx, job.Args.Run, PageLoads, x.Key(), x.Start, x)
	})
	if err == nil && stored && w.Loaded != nil {
		w.Loaded(x)
	}
	return err
}

func (w *Worker) jobInfo(job *river.Job[measureArgs]) *measure.JobInfo {
	return &measure.JobInfo{ID: job.ID, Attempt: job.Attempt, Worker: w.ID, AttemptedBy: job.AttemptedBy, Version: buildinfo.Version()}
}

// commit stores a task's result (write says whether it stored it) and
// completes its job in one transaction; a result its run held already is
// recorded as a duplicate delivery instead, whole (v) under key. A store
// that is briefly away (a database restart) is waited for, so the task
// is not measured again for nothing.
func (w *Worker) commit(ctx context.Context, job *river.Job[measureArgs], key string, start time.Time, v any,
	write func(context.Context, *sql.Tx) (bool, error)) (bool, error) {
	sctx := context.WithoutCancel(ctx) // keeps River's client for JobCompleteTx
	var stored bool
	err := store.Retry(sctx, func() error {
		return w.Store.InTx(sctx, func(tx *sql.Tx) error {
			var err error
			if stored, err = write(sctx, tx); err != nil {
				return err
			}
			if !stored {
				key := fmt.Sprintf("%s#job%d/attempt%d", key, job.ID, job.Attempt)
				if err := w.Store.WriteResultTx(sctx, tx, job.Args.Run, Duplicates, key, start, v); err != nil {
					return err
				}
			}
			_, err = river.JobCompleteTx[*riverdatabasesql.Driver](sctx, tx, job)
			if errors.Is(err, rivertype.ErrNotFound) {
				return nil // no longer this worker's job (rescued meanwhile): the sample stands, stored once
			}
			return err
		})
	}, func(err error, wait time.Duration) {
		fmt.Fprintf(w.Log, "worker %s: %v; trying again in %v\n", w.ID, err, wait)
	})
	if store.Permanent(err) {
		return false, w.refuse(fmt.Errorf("job %d: its sample cannot be stored: %w", job.ID, err))
	}
	if err != nil {
		return false, err
	}
	if stored {
		w.count(func(s *WorkerStats) { s.Stored++ })
	} else {
		w.count(func(s *WorkerStats) { s.Duplicates++ })
		fmt.Fprintf(w.Log, "worker %s: job %d (attempt %d) was stored by an earlier delivery; recorded as a duplicate\n", w.ID, job.ID, job.Attempt)
	}
	return stored, nil
}

// refuse fails a job for good with why, recorded in the queue (River
// keeps a cancelled job's error) and on the log.
func (w *Worker) refuse(why error) error {
	w.count(func(s *WorkerStats) { s.Refused++ })
	fmt.Fprintf(w.Log, "worker %s: refused: %v\n", w.ID, why)
	return river.JobCancel(why)
}

func (w *Worker) count(f func(*WorkerStats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// pacer spaces a worker's tasks to at most rate a second.
type pacer struct {
	mu   sync.Mutex
	next time.Time
}

func (p *pacer) wait(ctx context.Context, rate float64) error {
	if rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(time.Duration(float64(time.Second) / rate))
	p.mu.Unlock()
	select {
	case <-time.After(time.Until(at)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryPolicy retries a job soon: its failures are the infrastructure's
// (a worker killed, the store away), not the measured server's, which
// are samples. 1, 4, 9 ... seconds, at most a minute.
type retryPolicy struct{}

func (retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	n := time.Duration(job.Attempt)
	return time.Now().Add(min(n*n*time.Second, time.Minute))
}

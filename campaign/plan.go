package campaign

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/printable"

	"github.com/riverqueue/river"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// maxAttempts is how often a job is delivered before River gives up on
// it: enough for a few killed workers and a database restart.
const maxAttempts = 10

// PlanCampaign expands c into one job per task and vantage point and
// records the run, all in one transaction: a plan is whole or absent.
// Targets files are read here, on the planning machine; so is the CA.
func PlanCampaign(ctx context.Context, st *store.Store, c *measure.Campaign) (store.Run, *Plan, error) {
	if err := needPostgres(st); err != nil {
		return store.Run{}, nil, err
	}
	if len(c.Vantages) == 0 {
		return store.Run{}, nil, fmt.Errorf("no vantages: a planned campaign names the vantage points it measures from")
	}
	p, err := newPlan(c)
	if err != nil {
		return store.Run{}, nil, err
	}
	shared, err := targets(c.Targets, c.TargetsFile)
	if err != nil {
		return store.Run{}, nil, err
	}
	var jobs []river.InsertManyParams
	for _, v := range c.Vantages {
		vp := VantagePlan{Vantage: v.Vantage, Targets: shared}
		if len(v.Targets) > 0 || v.TargetsFile != "" {
			if vp.Targets, err = targets(v.Targets, v.TargetsFile); err != nil {
				return store.Run{}, nil, err
			}
		}
		// Checked here too, before any job exists: a caller may not have
		// loaded c with LoadCampaign, and targets files are read here.
		if err := measure.CheckVantageName(v.Name); err != nil {
			return store.Run{}, nil, err
		}
		for _, t := range vp.Targets {
			if err := measure.CheckTarget(t); err != nil {
				return store.Run{}, nil, fmt.Errorf("vantage %s: target %q: %w", v.Name, printable.String(t[:min(len(t), 64)]), err)
			}
		}
		if err := c.Reachable(vp.Targets); err != nil {
			return store.Run{}, nil, fmt.Errorf("vantage %s: target %w", v.Name, err)
		}
		tasks, err := p.tasks(vp.Targets)
		if err != nil {
			return store.Run{}, nil, fmt.Errorf("vantage %s: %w", v.Name, err)
		}
		vp.Tasks = len(tasks)
		p.Vantages = append(p.Vantages, vp)
		for _, t := range tasks {
			jobs = append(jobs, river.InsertManyParams{Args: measureArgs{Vantage: v.Name, Task: t},
				InsertOpts: &river.InsertOpts{Queue: QueueName(v.Name), MaxAttempts: maxAttempts}})
		}
	}
	if err := migrate(ctx, st); err != nil {
		return store.Run{}, nil, err
	}
	client, err := river.NewClient(driver(st), &river.Config{})
	if err != nil {
		return store.Run{}, nil, err
	}
	run := store.NewRun(Kind, "", p)
	id := planID(run.Spec)
	for i := range jobs {
		a := jobs[i].Args.(measureArgs)
		a.Run, a.Plan = run.ID, id
		jobs[i].Args = a
		if a.Task.Round > 1 {
			// River holds a scheduled job until it is due: each round is
			// queued now and taken on time, with no scheduler of ours.
			jobs[i].InsertOpts.ScheduledAt = p.due(run.StartedAt, a.Task.Round)
		}
	}
	err = st.InTx(ctx, func(tx *sql.Tx) error {
		if err := st.BeginRunTx(ctx, tx, run); err != nil {
			return err
		}
		const batch = 10000 // rows per statement, well under PostgreSQL's limit of parameters
		for i := 0; i < len(jobs); i += batch {
			if _, err := client.InsertManyFastTx(ctx, tx, jobs[i:min(i+batch, len(jobs))]); err != nil {
				return fmt.Errorf("queueing jobs: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return store.Run{}, nil, err
	}
	return run, p, nil
}

// newPlan is what a campaign records as its run's spec, vantage points
// and tasks aside: files (CA, pages, blocklists, targets' notes) read
// here, on the planning machine.
func newPlan(c *measure.Campaign) (*Plan, error) {
	p := &Plan{Name: c.Name, Query: c.Query, Transports: c.Transports, Conditions: c.Conditions, Repeat: c.Repeat,
		Timeout: c.Timeout, Retries: c.Retries, Concurrency: c.Concurrency, Rate: c.Rate, Seed: c.Seed,
		TLS: TLS{Insecure: c.TLS.Insecure, SNI: c.TLS.SNI}, Campaign: c, Every: c.Every, Rounds: c.Rounds}
	if c.TLS.CA != "" {
		pem, err := listfile.Read(c.TLS.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		if _, err := transport.CertPool(pem); err != nil { // said here, not by every worker's every task
			return nil, fmt.Errorf("tls.ca: %s %w", c.TLS.CA, err)
		}
		p.TLS.CAPEM = string(pem)
	}
	var err error
	if c.Pages != nil {
		if p.Pages, err = c.Pages.List(); err != nil {
			return nil, fmt.Errorf("pages: %w", err)
		}
		p.PageTimeout, p.Stub, p.Contact = cmp.Or(c.Pages.Timeout, 30*time.Second), cmp.Or(c.Pages.Stub, "0rtt"), c.Contact
		p.PageQueries = cmp.Or(c.Pages.Queries, measure.DefaultPageQueries)
	}
	block, err := c.Blocked()
	if err != nil {
		return nil, err
	}
	p.Blocked, p.Allow = block.Prefixes(), c.AllowSpecial
	if err := c.Reachable(p.Pages); err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	if _, err := p.spec(); err != nil {
		return nil, err
	}
	for _, f := range append([]string{c.TargetsFile}, vantageFiles(c)...) {
		if f == "" {
			continue
		}
		notes, err := measure.TargetNotes(f)
		if err != nil {
			return nil, err
		}
		for t, n := range notes {
			if p.Notes == nil {
				p.Notes = map[string]string{}
			}
			p.Notes[t] = n
		}
	}
	return p, nil
}

// vantageFiles are the targets files the vantage points name.
func vantageFiles(c *measure.Campaign) []string {
	var out []string
	for _, v := range c.Vantages {
		out = append(out, v.TargetsFile)
	}
	return out
}

// targets is a target list and the targets of a file: at least one.
func targets(list []string, file string) ([]string, error) {
	out, err := measure.Targets(list, file)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("no targets")
	}
	return out, err
}

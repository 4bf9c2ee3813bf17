// Package campaign runs one measurement campaign from many vantage points
// on a job queue: Plan expands a spec into a job per task and vantage
// point (a queue each) in the store's PostgreSQL database, Worker takes
// one vantage point's jobs and measures each with package measure's
// method, and Status says how far each vantage point is.
//
// The queue is River (riverqueue.com), which keeps its jobs in tables
// beside the samples and locks them with FOR UPDATE SKIP LOCKED. A job is
// delivered at least once: a worker killed mid-job leaves it running
// until River's rescuer hands it to another worker of the same vantage
// point. Samples are stored exactly once all the same, because a worker
// stores a sample and completes its job in one transaction, and a sample
// its run already holds is not stored again (store.WriteOnce): a second
// delivery is recorded as a duplicate, never as a second sample.
package campaign

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/doxlab/doxlab/internal/blocklist"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// Kind is the run kind of a planned campaign, as of one run by
// 'doxlab campaign run'.
const Kind = "campaign"

// jobKind names doxlab's measurement jobs in River's table.
const jobKind = "doxlab_measure"

// Duplicates are the deliveries of a task whose sample was stored already
// (by an earlier delivery): one result each, whole, so that attempts are
// accounted for.
var Duplicates = store.NewKind("campaign-duplicate")

// Plan is what a planned campaign's run records as its spec: everything
// a worker needs to measure its tasks the same way wherever it runs (the
// CA is kept whole, not as a path on the planning machine).
type Plan struct {
	Name        string                `json:"name"`
	Query       measure.CampaignQuery `json:"query"`
	Transports  []string              `json:"transports"`
	Conditions  []string              `json:"conditions"`
	Repeat      int                   `json:"repeat"`
	Timeout     time.Duration         `json:"timeout"`
	Retries     int                   `json:"retries"`
	Concurrency int                   `json:"concurrency"`
	Rate        float64               `json:"rate"` // tasks a second per worker; 0: no limit
	Seed        uint64                `json:"seed"`
	TLS         TLS                   `json:"tls"`
	Vantages    []VantagePlan         `json:"vantages"`
	Campaign    *measure.Campaign     `json:"campaign"` // the spec as given
	// Rounds, if any, repeat every task, round k due Every × (k-1)
	// after the run was planned.
	Every  time.Duration `json:"every,omitempty"`
	Rounds int           `json:"rounds,omitempty"`
	// Notes are what the targets files said of each target after a #:
	// from doxlab survey --targets-out, what was verified of it, kept
	// with the run its samples are stored under.
	Notes map[string]string `json:"target_notes,omitempty"`
	// Pages, if any, make the tasks page loads (measure.CampaignPages),
	// read on the planning machine, Tranco list and all.
	Pages       []string      `json:"pages,omitempty"`
	PageTimeout time.Duration `json:"page_timeout,omitempty"`
	// PageQueries bounds a page's DNS queries through the stub
	// (measure.CampaignPages.Queries); 0 in a plan from before it:
	// measure.DefaultPageQueries.
	PageQueries int    `json:"page_queries,omitempty"`
	Stub        string `json:"stub,omitempty"`
	Contact     string `json:"contact,omitempty"`
	// Blocked are the blocklist's and opt-out files' prefixes, read when
	// planning: no worker contacts an address in them.
	Blocked []string `json:"blocked,omitempty"`
	// Allow are the special-purpose prefixes the campaign may contact
	// (allow_special); every other special-purpose address is refused.
	Allow []string `json:"allow_special,omitempty"`
	// Here is how many tasks a page-load campaign measured on one machine
	// (doxlab campaign run) has, for its status; 0 for a planned one.
	Here int `json:"tasks_here,omitempty"`
}

// tasks are the tasks of a vantage point measuring targets, once per
// round: what plan queues and what a worker accepts.
func (p *Plan) tasks(targets []string) ([]measure.Task, error) {
	s := measure.Spec{Targets: targets, Transports: slices.Clone(p.Transports), Conditions: slices.Clone(p.Conditions), Pages: p.Pages, Repeat: p.Repeat, Seed: p.Seed}
	tasks, err := s.Tasks()
	if err != nil {
		return nil, err
	}
	// The defaults Tasks chose, each recorded, so that the run's spec
	// says what was measured.
	if p.Transports == nil {
		p.Transports = s.Transports
	}
	if p.Conditions == nil {
		p.Conditions = s.Conditions
	}
	if p.Repeat <= 0 {
		p.Repeat = s.Repeat
	}
	return p.inRounds(tasks), nil
}

// pageOptions are how the plan's pages are loaded.
func (p *Plan) pageOptions(s measure.Spec) (PageOptions, error) {
	policy, err := p.policy()
	return PageOptions{Timeout: p.PageTimeout, Stub: p.Stub, Contact: p.Contact, Upstream: s.Options, Policy: policy,
		Queries: cmp.Or(p.PageQueries, measure.DefaultPageQueries)}, err
}

// inRounds is tasks once per round, each labelled with its round; tasks
// as they are for a campaign not in rounds.
func (p *Plan) inRounds(tasks []measure.Task) []measure.Task {
	if p.Rounds == 0 {
		return tasks
	}
	out := make([]measure.Task, 0, len(tasks)*p.Rounds)
	for r := 1; r <= p.Rounds; r++ {
		for _, t := range tasks {
			t.Round = r
			out = append(out, t)
		}
	}
	return out
}

// due is when round r (from 1) of a run planned at start is due.
func (p *Plan) due(start time.Time, r int) time.Time {
	return start.Add(time.Duration(max(r-1, 0)) * p.Every)
}

// TLS is how workers verify servers.
type TLS struct {
	CAPEM    string `json:"ca_pem,omitempty"`
	Insecure bool   `json:"insecure"`
	SNI      string `json:"sni,omitempty"`
}

// VantagePlan is one vantage point of a plan: its label, the resolvers it
// measures and how many tasks that made.
type VantagePlan struct {
	measure.Vantage
	Targets []string `json:"targets"`
	Tasks   int      `json:"tasks"`
}

// QueueName is the job queue of a vantage point.
func QueueName(vantage string) string { return "vantage-" + vantage }

// measureArgs is one job: a task of a run, for one vantage point, and
// the identity of the plan it was queued under (planID), so that a
// worker measures nothing its stored plan does not hold.
type measureArgs struct {
	Run     string       `json:"run"`
	Plan    string       `json:"plan,omitempty"` // empty in jobs queued before plans had an identity
	Vantage string       `json:"vantage"`
	Task    measure.Task `json:"task"`
}

// planID is a plan's identity: a digest of its run's spec as stored.
func planID(spec []byte) string {
	h := sha256.Sum256(spec)
	return hex.EncodeToString(h[:16])
}

func (measureArgs) Kind() string { return jobKind }

// spec is the measure.Spec a worker measures a plan's tasks with.
func (p *Plan) spec() (measure.Spec, error) {
	s := measure.Spec{Timeout: p.Timeout, Retries: p.Retries, Options: transport.Options{Insecure: p.TLS.Insecure, SNI: p.TLS.SNI}}
	p.Query.Apply(&s)
	if p.TLS.CAPEM != "" {
		pool, err := transport.CertPool([]byte(p.TLS.CAPEM))
		if err != nil {
			return s, err
		}
		s.Options.RootCAs = pool
	}
	policy, err := p.policy()
	if err != nil {
		return s, err
	}
	s.Options.Refuse = policy.Check
	return s, nil
}

// policy is where the plan's tasks may send traffic (blocklist.Policy).
func (p *Plan) policy() (*blocklist.Policy, error) {
	block, err := blocklist.FromPrefixes(p.Blocked, "the plan's blocklist")
	if err != nil {
		return nil, err
	}
	allow, err := blocklist.ParseAllow(p.Allow)
	if err != nil {
		return nil, fmt.Errorf("the plan's allow_special: %w", err)
	}
	return &blocklist.Policy{Block: block, Allow: allow}, nil
}

// taskBudget is the longest a task of p can take: warm-up, measurement
// and probe, each up to the timeout, on every try, and a margin.
func (p *Plan) taskBudget() time.Duration {
	if len(p.Pages) > 0 {
		return pageBudget(p.PageTimeout)
	}
	t := p.Timeout
	if t <= 0 {
		t = 5 * time.Second
	}
	return time.Duration(3*(p.Retries+1))*t + 10*time.Second
}

// errNoPlan is a job whose run is not a plan this worker can measure: it
// never will be, unlike a store that is briefly away.
var errNoPlan = errors.New("no plan to measure")

// loadPlan reads a planned run's plan from the store, with its identity.
func loadPlan(ctx context.Context, st *store.Store, runID string) (*Plan, string, error) {
	r, err := st.Run(ctx, runID)
	if errors.Is(err, store.ErrNoRun) {
		return nil, "", fmt.Errorf("%w: %w", errNoPlan, err)
	}
	if err != nil {
		return nil, "", err
	}
	var p Plan
	if err := json.Unmarshal(r.Spec, &p); err != nil || r.Kind != Kind || len(p.Vantages) == 0 {
		return nil, "", fmt.Errorf("%w: run %s is not a planned campaign", errNoPlan, runID)
	}
	return &p, planID(r.Spec), nil
}

// ErrNeedPostgres is a planned campaign given a store other than
// PostgreSQL: its queue must be shared by every vantage point.
var ErrNeedPostgres = errors.New("a planned campaign needs a PostgreSQL store, which every vantage point reaches")

// needPostgres refuses a store the queue cannot share between machines.
func needPostgres(st *store.Store) error {
	if !st.Postgres() {
		return ErrNeedPostgres
	}
	return nil
}

// driver is River's driver on the store's database/sql pool. It polls
// for jobs rather than LISTENing, so nothing but the pool is needed.
func driver(st *store.Store) *riverdatabasesql.Driver { return riverdatabasesql.New(st.DB()) }

// migrate creates or upgrades River's tables, under a lock so that
// workers starting together take turns. River's migrations each run in a
// transaction of their own (one adds an enum value the next uses), so the
// lock is a session's, on a connection held meanwhile.
func migrate(ctx context.Context, st *store.Store) error {
	m, err := rivermigrate.New(driver(st), nil)
	if err != nil {
		return err
	}
	conn, err := st.DB().Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	const lock = 7310432 // any constant: doxlab's queue-schema lock
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lock)
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("creating the job queue's tables: %w", err)
	}
	return nil
}

var _ river.JobArgs = measureArgs{}

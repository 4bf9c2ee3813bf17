package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/internal/printable"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

const campaignUsage = `usage: doxlab campaign run SPEC.yaml [--store DSN] [--run ID] [--json] [--out FILE]
       doxlab campaign plan SPEC.yaml --store postgres://...
       doxlab campaign status [--run ID] [--json] --store postgres://...
       doxlab campaign cancel --run ID --store postgres://...
       doxlab campaign grant ROLE --store postgres://ADMIN@...

run measures a campaign described in YAML (see examples/campaign.yaml) on
this machine: targets × transports × conditions × repetitions, stored as
it goes; a spec with pages (examples/campaign-pages.yaml) loads each page
in Chromium with its DNS through a stub to each target over each
protocol, as root. A spec with an error is rejected before anything runs, naming
file, line and field. A run that stopped continues with --run ID.

plan expands a spec with vantages into a job per task and vantage point,
queued in a PostgreSQL store for workers on each vantage machine
('doxlab worker --vantage NAME'); status shows each vantage point's
progress; cancel stops a planned campaign, keeping what it stored
(docs/campaigns.md); grant gives a worker's PostgreSQL role what a worker
needs of the store and nothing more (docs/vantage-points.md).
`

func runCampaign(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, campaignUsage)
		return exitOK
	}
	if len(args) >= 1 && args[0] == "status" {
		return runCampaignStatus(args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "cancel" {
		return runCampaignCancel(args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "grant" {
		return runCampaignGrant(args[1:], stdout, stderr)
	}
	if len(args) >= 2 && args[0] == "plan" {
		return runCampaignPlan(args[1:], stdout, stderr)
	}
	if len(args) < 2 || args[0] != "run" {
		fmt.Fprint(stderr, campaignUsage)
		return exitUsage
	}
	fs := newFlagSet("campaign run", stderr)
	storeDSN := fs.String("store", "", "the store (default: the spec's store, else doxlab.db)")
	runID := fs.String("run", "", "continue this run")
	fresh := fs.Bool("new", false, "begin a new run even though an earlier run of the same spec is in the store")
	asJSON := fs.Bool("json", false, "print every sample as a JSON line")
	outPath := fs.String("out", "", "also write every sample as JSON lines to `FILE`")
	loader := pageLoaderFlags(fs)
	pos, fail, code, done := subcommand(fs, "campaign", args[1:], 1, campaignUsage, stderr)
	if done {
		return code
	}
	c, err := measure.LoadCampaign(pos[0])
	if err != nil {
		return fail("%v", err)
	}
	if len(c.Vantages) > 0 {
		return fail("%s names vantages: plan it for workers with 'doxlab campaign plan', or remove them to run it here", pos[0])
	}
	dsn := cmp.Or(*storeDSN, c.Store, "doxlab.db")
	if c.Pages != nil {
		return runPageCampaign(c, pageRun{store: dsn, runID: *runID, fresh: *fresh, json: *asJSON, loader: loader(), args: append([]string{"campaign"}, args...)}, stdout, stderr)
	}
	spec, err := c.Spec()
	if err != nil {
		return fail("%v", err)
	}
	if _, err := spec.Tasks(); err != nil {
		return fail("%s: %v", pos[0], err)
	}
	return runMeasurement(spec, measureRun{store: dsn, runID: *runID, kind: "campaign", json: *asJSON, out: *outPath, fresh: *fresh, args: append([]string{"campaign"}, args...)}, stdout, stderr)
}

func runCampaignPlan(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("campaign plan", stderr)
	storeDSN := fs.String("store", os.Getenv("DOXLAB_STORE"), "the PostgreSQL store every vantage point reaches (default $DOXLAB_STORE, else the spec's store)")
	pos, fail, code, done := subcommand(fs, "campaign plan", args, 1, campaignUsage, stderr)
	if done {
		return code
	}
	c, err := measure.LoadCampaign(pos[0])
	if err != nil {
		return fail("%v", err)
	}
	dsn := cmp.Or(*storeDSN, c.Store)
	if dsn == "" {
		return fail("no store: give --store postgres://... (or store: in the spec)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return fail("%v", err)
	}
	defer st.Close()
	run, plan, err := campaign.PlanCampaign(ctx, st, c)
	if err != nil {
		return fail("%v", err)
	}
	total := 0
	for _, v := range plan.Vantages {
		total += v.Tasks
		fmt.Fprintf(stdout, "vantage %-16s %6d tasks on %d targets, queue %s\n", printable.String(v.Name), v.Tasks, len(v.Targets), printable.String(campaign.QueueName(v.Name)))
	}
	fmt.Fprintf(stdout, "planned run %s: %d tasks for %d vantage points\n", run.ID, total, len(plan.Vantages))
	if plan.Rounds > 0 {
		last := run.StartedAt.Add(time.Duration(plan.Rounds-1) * plan.Every)
		fmt.Fprintf(stdout, "in %d rounds every %v, each queued now and taken when due; the last is due at %s\n", plan.Rounds, plan.Every, last.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(stdout, "start a worker on each vantage point: doxlab worker --vantage NAME --store %s\n", store.Redact(dsn))
	return exitOK
}

func runCampaignStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("campaign status", stderr)
	storeDSN := fs.String("store", os.Getenv("DOXLAB_STORE"), "the campaign's store: a planned campaign's PostgreSQL, or a page campaign's measured here (default $DOXLAB_STORE)")
	runID := fs.String("run", "", "the run (default the campaign planned, or the page campaign measured here, last)")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	_, fail, code, done := subcommand(fs, "campaign status", args, 0, campaignUsage, stderr)
	if done {
		return code
	}
	ctx := context.Background()
	st, code, ok := openStore(ctx, *storeDSN, fail)
	if !ok {
		return code
	}
	defer st.Close()
	var err error
	id := *runID
	if id == "" {
		if id, err = campaign.LatestPlanned(ctx, st); err != nil {
			return fail("%v", err)
		}
		if id == "" {
			return fail("the store holds no planned campaign and no page campaign measured here")
		}
	}
	s, err := campaign.GetStatus(ctx, st, id)
	if err != nil {
		return fail("%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(s)
		return exitOK
	}
	s.Write(stdout, time.Now())
	return exitOK
}

func runCampaignCancel(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("campaign cancel", stderr)
	storeDSN := fs.String("store", os.Getenv("DOXLAB_STORE"), "the campaign's PostgreSQL store (default $DOXLAB_STORE)")
	runID := fs.String("run", "", "the planned run to cancel (required: see campaign status)")
	_, fail, code, done := subcommand(fs, "campaign cancel", args, 0, campaignUsage, stderr)
	if done {
		return code
	}
	if *runID == "" {
		return fail("which run? give --run ID (campaign status names it)")
	}
	ctx := context.Background()
	st, code, ok := openStore(ctx, *storeDSN, fail)
	if !ok {
		return code
	}
	defer st.Close()
	waiting, running, err := campaign.Cancel(ctx, st, *runID)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "cancelled run %s: %d jobs not yet taken, %d under way (their workers give them back unstored); stored samples stay\n", *runID, waiting, running)
	return exitOK
}

func runCampaignGrant(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("campaign grant", stderr)
	storeDSN := fs.String("store", os.Getenv("DOXLAB_STORE"), "the store, as a role that owns its tables (the coordinator's)")
	pos, fail, code, done := subcommand(fs, "campaign grant", args, 1, campaignUsage, stderr)
	if done {
		return code
	}
	ctx := context.Background()
	st, code, ok := openStore(ctx, *storeDSN, fail)
	if !ok {
		return code
	}
	defer st.Close()
	if err := campaign.Grant(ctx, st, pos[0]); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "role %s may now read plans, add samples and page loads, and work the queue; nothing else\n", pos[0])
	return exitOK
}

// subcommand parses a subcommand's flags, expecting want positional
// arguments: a bad flag gets parseInterleaved's one line, a wrong count
// of arguments the usage on stderr (fs.Usage if usage is ""). When done,
// it returns the exit code. fail prints one line naming the subcommand.
func subcommand(fs *flag.FlagSet, name string, args []string, want int, usage string, stderr io.Writer) (pos []string, fail func(string, ...any) int, code int, done bool) {
	fail = func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab "+name+": "+format+"\n", advised(a)...)
		return exitUsage
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, fail, exitOK, true
	}
	if err != nil {
		return nil, fail, exitUsage, true
	}
	if len(pos) != want {
		if usage == "" {
			fs.Usage()
		} else {
			fmt.Fprint(stderr, usage)
		}
		return nil, fail, exitUsage, true
	}
	return pos, fail, 0, false
}

// openStore opens the campaign store a flag or $DOXLAB_STORE names,
// which must exist: status, cancel and grant read one, and a mistyped
// SQLite path is no new empty store.
func openStore(ctx context.Context, dsn string, fail func(string, ...any) int) (*store.Store, int, bool) {
	if dsn == "" {
		return nil, fail("no store: give --store postgres://... or set DOXLAB_STORE"), false
	}
	if !storeExists(dsn) {
		return nil, fail("no store at %s", dsn), false
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, fail("%v", err), false
	}
	return st, 0, true
}

const workerUsage = `usage: doxlab worker --vantage NAME --store postgres://... [flags]

Takes the jobs of one vantage point of every planned campaign
('doxlab campaign plan') from the PostgreSQL store and measures each the
way 'doxlab measure' does, storing each sample with the vantage point's
name, address, network and location. Run one or more per vantage machine;
a worker that dies leaves its jobs to the others of its vantage point.
Every flag also comes from the environment (DOXLAB_VANTAGE, DOXLAB_STORE,
...), for containers. SIGTERM finishes the tasks under way, then stops.

`

func runWorker(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worker", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, workerUsage); fs.PrintDefaults() }
	vantage := fs.String("vantage", os.Getenv("DOXLAB_VANTAGE"), "the vantage point whose jobs to take ($DOXLAB_VANTAGE)")
	storeDSN := fs.String("store", os.Getenv("DOXLAB_STORE"), "the campaign's PostgreSQL store ($DOXLAB_STORE)")
	var env envDefaults
	concurrency := fs.Int("concurrency", env.Int("DOXLAB_CONCURRENCY", 4), "tasks measured at once ($DOXLAB_CONCURRENCY)")
	address := fs.String("address", os.Getenv("DOXLAB_ADDRESS"), "the vantage point's address as resolvers see it, e.g. behind NAT ($DOXLAB_ADDRESS; default each connection's local address)")
	id := fs.String("id", os.Getenv("DOXLAB_WORKER_ID"), "the worker's name in the jobs it takes, one process at a time: restarted under it, a worker takes back at once the jobs it held when killed ($DOXLAB_WORKER_ID; default VANTAGE/HOST/PID)")
	rescue := fs.Duration("rescue-after", env.Duration("DOXLAB_RESCUE_AFTER", 2*time.Minute), "hand a job taken this long ago to another worker, its taker presumed dead; the same for every worker ($DOXLAB_RESCUE_AFTER)")
	drain := fs.Bool("drain", env.Bool("DOXLAB_DRAIN"), "exit once the vantage point's queue is empty ($DOXLAB_DRAIN=1), as a Kubernetes Job should")
	quiet := fs.Bool("quiet", false, "print no line per sample")
	check := fs.Bool("check", false, "check this vantage point and exit: the store over verified TLS, the schema, the role's grants, the clock, the queue; with --pages what page loads need, a confined browser started")
	checkPages := fs.Bool("pages", false, "with --check: check page loads too")
	loader := pageLoaderFlags(fs)
	_, fail, code, done := subcommand(fs, "worker", args, 0, "", stderr)
	if done {
		return code
	}
	switch {
	case env.err != nil:
		return fail("%v", env.err)
	case *vantage == "":
		return fail("no vantage point: give --vantage NAME or set DOXLAB_VANTAGE")
	case *storeDSN == "":
		return fail("no store: give --store postgres://... or set DOXLAB_STORE")
	case *concurrency < 1 || *concurrency > measure.MaxConcurrency:
		return fail("--concurrency %d: want 1 to %d", *concurrency, measure.MaxConcurrency)
	case *rescue <= 0:
		// The library takes 0 for its default: a -5m typed here was
		// two minutes unsaid.
		return fail("--rescue-after %v: want a positive duration", *rescue)
	}
	if err := measure.CheckVantageName(*vantage); err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *check {
		st, err := store.Open(ctx, *storeDSN)
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %-8s %v\n", "store", err)
			return 1
		}
		defer st.Close()
		if !campaign.WriteFindings(stdout, campaign.CheckVantage(ctx, st, *storeDSN, *vantage, *checkPages, loader())) {
			fmt.Fprintln(stderr, "doxlab worker: this vantage point is not ready to measure (FAIL above)")
			return 1
		}
		fmt.Fprintf(stdout, "vantage point %s is ready to measure\n", *vantage)
		return exitOK
	}
	// A worker started while the database restarts waits for it a while.
	var st *store.Store
	err := store.Retry(ctx, func() (err error) { st, err = store.Open(ctx, *storeDSN); return err }, func(err error, wait time.Duration) {
		fmt.Fprintf(stderr, "doxlab worker: %v; trying again in %v\n", err, wait)
	})
	if err != nil {
		return fail("%v", err)
	}
	defer st.Close()
	w := &campaign.Worker{Store: st, Vantage: *vantage, ID: *id, Concurrency: *concurrency, Address: *address, RescueAfter: *rescue, Drain: *drain, Log: stderr, Pages: loader()}
	var mu sync.Mutex
	if !*quiet {
		w.Stored = func(x *measure.Sample) {
			mu.Lock()
			defer mu.Unlock()
			ms := "-"
			if x.Measure != nil && x.Status.HasResponse() {
				ms = fmt.Sprintf("%.1f ms", x.Measure.Timing.TotalMs)
			}
			fmt.Fprintf(stdout, "%s %s %s %s: %s %s (job %d, attempt %d)\n", printable.String(x.Vantage.Name), printable.String(x.URL), x.Transport, x.Condition, x.Status, ms, x.Job.ID, x.Job.Attempt)
		}
		w.Loaded = func(x *campaign.PageLoad) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stderr, "%s %s (job %d, attempt %d)\n", printable.String(x.Vantage.Name), x.Line(), x.Job.ID, x.Job.Attempt)
		}
	}
	err = w.Run(ctx)
	s := w.Stats()
	fmt.Fprintf(stderr, "doxlab worker: %d samples stored, %d duplicate deliveries dropped, %d tasks given back, %d jobs refused\n", s.Stored, s.Duplicates, s.Cancelled, s.Refused)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "doxlab worker: %v\n", err)
		return 1
	}
	return exitOK
}

// envDefaults reads flags' defaults from the environment, which is how
// containers configure a worker. A value that does not parse is an
// error, said once the flags are parsed: DOXLAB_DRAIN=true, or
// DOXLAB_RESCUE_AFTER=90 without its unit, once fell back to the
// default unsaid (a Job that never exited, a rescue at two minutes).
type envDefaults struct{ err error }

func (e *envDefaults) Int(key string, def int) int {
	return envValue(e, key, def, "a whole number", strconv.Atoi)
}

func (e *envDefaults) Duration(key string, def time.Duration) time.Duration {
	return envValue(e, key, def, "a duration such as 90s or 2m", time.ParseDuration)
}

// Bool takes what a boolean flag takes: 1, t, true, 0, f, false (any
// case).
func (e *envDefaults) Bool(key string) bool {
	return envValue(e, key, false, "1 or 0 (true or false)", strconv.ParseBool)
}

// envValue is $key parsed, def where it is unset or empty, and def with
// the first error kept where it does not parse.
func envValue[T any](e *envDefaults, key string, def T, want string, parse func(string) (T, error)) T {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := parse(s)
	if err != nil {
		if e.err == nil {
			e.err = fmt.Errorf("$%s=%s: want %s", key, printable.String(s), want)
		}
		return def
	}
	return v
}

// pageLoaderFlags are the flags of commands that load pages (campaign
// run, worker): the browser, its user and extra switches.
func pageLoaderFlags(fs *flag.FlagSet) func() campaign.PageLoaderConfig {
	path := fs.String("browser", os.Getenv("DOXLAB_BROWSER"), "the Chromium binary page loads use ($DOXLAB_BROWSER; default chromium on PATH)")
	user := fs.String("browser-user", cmp.Or(os.Getenv("DOXLAB_BROWSER_USER"), campaign.DefaultBrowserUser), "the unprivileged user page loads run the browser as, with its sandbox on ($DOXLAB_BROWSER_USER)")
	var flags stringList
	fs.Var(&flags, "browser-flag", "an extra Chromium switch for page loads, NAME or NAME=VALUE (a testbed's certificates); repeatable")
	return func() campaign.PageLoaderConfig {
		return campaign.PageLoaderConfig{Browser: *path, BrowserUser: *user, BrowserFlags: flags}
	}
}

package campaign

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/printable"

	"github.com/doxlab/doxlab/internal/blocklist"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// PageLoads are the page loads of campaigns, each stored whole under its
// sample's key (the vantage point's name, then the task's).
var PageLoads = store.NewKind("campaign-load")

// PageLoad is one page-load task of a campaign, measured: the task, the
// vantage point and delivery, as for a DNS sample, and the loader's own
// record of the two navigations, whole.
type PageLoad struct {
	measure.Task
	Start  time.Time `json:"start"`
	Status string    `json:"status"` // ok, or why the load failed (the loader's statuses)
	Error  string    `json:"error,omitempty"`
	// PLTMs and FCPMs are the measured navigation's page load time and
	// first contentful paint (the loader's sample has them too), for a
	// line per load and a glance at the store.
	PLTMs float64 `json:"plt_ms,omitempty"`
	FCPMs float64 `json:"fcp_ms,omitempty"`
	// Resolver is what discovery verified of the target (the plan's
	// note from doxlab survey --targets-out), if anything.
	Resolver string           `json:"resolver,omitempty"`
	Vantage  *measure.Vantage `json:"vantage,omitempty"`
	Job      *measure.JobInfo `json:"job,omitempty"`
	// Load is the loader's sample: browser timings, the stub's records
	// of every lookup with its upstream exchange, the page's origins.
	Load json.RawMessage `json:"load"`
}

// Key is the load's key in its run, as a DNS sample's.
func (x *PageLoad) Key() string {
	if x.Vantage != nil {
		return x.Vantage.Name + "/" + store.TaskKey(x.Task)
	}
	return store.TaskKey(x.Task)
}

// A PageLoader measures page-load tasks. The web experiment provides it
// (RegisterPageLoader): campaigns know nothing of browsers.
type PageLoader interface {
	// Load measures one task: a warm-up navigation, then the measured
	// one with a cold browser cache, the browser's DNS through a stub
	// forwarding to t.URL over t.Transport. A page that fails is a
	// PageLoad with its status; an error means the loader itself broke
	// (the browser lost), and the task is given back.
	Load(ctx context.Context, t measure.Task, o PageOptions) (*PageLoad, error)
	Close() error
}

// PageOptions are how a plan's pages are loaded.
type PageOptions struct {
	Timeout time.Duration // per navigation
	Stub    string        // what the stub keeps between upstream connections (measure.CampaignPages.Stub)
	Contact string        // sent in the User-Agent
	Queries int           // DNS queries the stub forwards for one task, at most (measure.CampaignPages.Queries)
	// Upstream are the stub's transport options: CA, SNI, and Refuse, the
	// policy's check, which the stub also applies to the addresses it
	// hands the browser.
	Upstream transport.Options
	// Policy is where the page may lead the browser: the loader enforces
	// it below the browser, on every connection it opens.
	Policy *blocklist.Policy
}

// PageLoaderConfig configures a loader for one process.
type PageLoaderConfig struct {
	Browser string    // the Chromium binary; default chromium on PATH
	Log     io.Writer // the loader's own problems
	// BrowserFlags are extra Chromium switches: for a testbed whose
	// pages have certificates of their own (ignore-certificate-errors-
	// spki-list=...), never needed in the wild.
	BrowserFlags []string
	// BrowserUser is the unprivileged user the browser runs as, with its
	// own sandbox on. Default: DefaultBrowserUser.
	BrowserUser string
}

// DefaultBrowserUser is the user page loads run their browser as, unless
// a worker names another: a system user of its own, created when doxlab
// is installed (useradd --system doxlab-browser).
const DefaultBrowserUser = "doxlab-browser"

var (
	loaderMu  sync.Mutex
	newLoader func(PageLoaderConfig) (PageLoader, error)
)

// RegisterPageLoader makes f the maker of page loaders; the web
// experiment calls it from init.
func RegisterPageLoader(f func(PageLoaderConfig) (PageLoader, error)) {
	loaderMu.Lock()
	defer loaderMu.Unlock()
	newLoader = f
}

// NewPageLoader makes a page loader, if one is registered.
func NewPageLoader(cfg PageLoaderConfig) (PageLoader, error) {
	loaderMu.Lock()
	f := newLoader
	loaderMu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("no page loader is registered (package experiment/web registers one)")
	}
	return f(cfg)
}

// pages is a process's one loader, made when a page task first needs it
// and shared by its tasks one at a time: two browsers loading at once on
// one machine would each measure the other's load.
type pages struct {
	cfg    PageLoaderConfig
	mu     sync.Mutex
	loader PageLoader
}

// load measures t with the shared loader.
func (ps *pages) load(ctx context.Context, t measure.Task, o PageOptions) (*PageLoad, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.loader == nil {
		l, err := NewPageLoader(ps.cfg)
		if err != nil {
			return nil, err
		}
		ps.loader = l
	}
	x, err := ps.loader.Load(ctx, t, o)
	if err != nil {
		// A broken loader is replaced for the next task.
		ps.loader.Close()
		ps.loader = nil
	}
	return x, err
}

func (ps *pages) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.loader != nil {
		ps.loader.Close()
		ps.loader = nil
	}
}

// pageBudget is the longest one page task may take: two navigations and
// the browser's resets, the stub's start and a margin.
func pageBudget(timeout time.Duration) time.Duration {
	return 2*timeout + 30*time.Second
}

// Here is a page-load campaign measured on this machine (doxlab campaign
// run): no queue, one task at a time, each stored as it is measured.
type Here struct {
	Store *store.Store
	Pages PageLoaderConfig // its Log is Here's
	Log   io.Writer
	// Progress, if set, is told after each task how many are done of how
	// many; Loaded of each load stored.
	Progress func(done, total int)
	Loaded   func(*PageLoad)
}

// NewPlan is the plan a campaign measured here records as its run's
// spec, and its tasks, from its targets (no vantage points).
func NewPlan(c *measure.Campaign) (*Plan, []measure.Task, error) {
	p, err := newPlan(c)
	if err != nil {
		return nil, nil, err
	}
	targets, err := targets(c.Targets, c.TargetsFile)
	if err != nil {
		return nil, nil, err
	}
	tasks, err := p.tasks(targets)
	p.Here = len(tasks)
	return p, tasks, err
}

// Line is a load as a worker's progress line: page, protocol, resolver,
// and its PLT and FCP, or why it failed.
func (x *PageLoad) Line() string {
	what := fmt.Sprintf("PLT %.0f ms, FCP %.0f ms", x.PLTMs, x.FCPMs)
	if x.Status != "ok" {
		what = x.Status
		if x.Error != "" {
			what += ": " + printable.String(x.Error[:min(len(x.Error), 160)])
		}
	}
	return fmt.Sprintf("%s %s via %s: %s", printable.String(x.Page), x.Transport, printable.String(x.URL), what)
}

// Run measures the tasks of p not yet in run runID (done: their keys),
// pacing them to the plan's rate. It returns the loads it stored.
func (h *Here) Run(ctx context.Context, runID string, p *Plan, tasks []measure.Task, done map[string]bool) ([]*PageLoad, error) {
	if h.Log == nil {
		h.Log = io.Discard
	}
	spec, err := p.spec()
	if err != nil {
		return nil, err
	}
	o, err := p.pageOptions(spec)
	if err != nil {
		return nil, err
	}
	ps := &pages{cfg: h.Pages}
	ps.cfg.Log = h.Log
	defer ps.close()
	var pace pacer
	var out []*PageLoad
	n := len(done)
	for _, t := range tasks {
		if done[store.TaskKey(t)] {
			continue
		}
		if err := pace.wait(ctx, p.Rate); err != nil {
			return out, err
		}
		// A loader that breaks (the browser lost) is started again for
		// the same task, three times at most.
		var x *PageLoad
		for try := 1; ; try++ {
			x, err = ps.load(ctx, t, o)
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			if err == nil {
				break
			}
			if try == 3 {
				return out, fmt.Errorf("the page loader failed 3 times in a row: %w", err)
			}
			fmt.Fprintf(h.Log, "the page loader failed (%v); starting it again\n", err)
		}
		x.Resolver = p.Notes[x.Target]
		// A load that finished is stored, even as an interrupt stops the
		// campaign.
		wctx := context.WithoutCancel(ctx)
		if err := store.Retry(wctx, func() error { return h.Store.WriteResult(wctx, runID, PageLoads, x.Key(), x.Start, x) }, func(err error, wait time.Duration) {
			fmt.Fprintf(h.Log, "%v; trying again in %v\n", err, wait)
		}); err != nil {
			return out, err
		}
		out = append(out, x)
		n++
		if h.Loaded != nil {
			h.Loaded(x)
		}
		if h.Progress != nil {
			h.Progress(n, len(tasks))
		}
	}
	return out, nil
}

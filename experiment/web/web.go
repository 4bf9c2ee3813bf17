// Package web is the web experiment: Chromium page loads over
// HTTP/3 with DNS in the browser's path (cross-layer paper §IV-C,
// Fig. 8-12; IMC 2022 slides).
package web

import (
	"cmp"
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/pageload/capture"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// Web is the cross-layer paper's page-load experiment (§III, §IV-C/D,
// Fig. 8-12) with DNS in the browser's real path: Chromium in the client
// host resolves through a doxlab stub in the same host, which forwards
// over one transport across the emulated link to the server, which also
// serves the pages over HTTP/3.
type Web struct {
	Profiles   []string // default: Table II's five
	Transports []string // the stub's upstream; default udp, doh2, doq (the paper's DoUDP, DoH, DoQ)
	H3         []string // 1rtt, 0rtt (default both)
	Pages      []string // corpus pages; default all
	Snapshots  []string // more page directories (e.g. wget -mpEk mirrors)
	StubStates []string // cold (a new connection per query, the default) and warm (kept from the warm-up)
	DNSModes   []string // stub (default) and decoupled (the paper's: DNS measured apart and added)
	// Engines load the pages: chromium (default) and doxlab, doxlab's page
	// loader replaying each page's graph: beside chromium, chosen among
	// Chromium's measured loads on the profile (each traced), after them;
	// alone, captured from Chromium at the run's start. With both, the
	// report compares them.
	Engines []string
	// Placement lays a multi-origin page's origins out: separate (the
	// default: a server per party, a certificate per origin) or cdn
	// (every origin on one CDN edge, one certificate); see
	// pages.Placement. NoOrigin has the servers send no ORIGIN frames
	// (RFC 9412), which they send by default: on one CDN they let a
	// browser load an announced origin on the connection it has, with
	// no lookup.
	Placement string
	NoOrigin  bool
	Repeat    int // loads per cell; default 10
	Timeout   time.Duration
	Seed      uint64 // task order; 0: random
	Doxlab    string // the binary run as the stub in the client host; default this one
	Browser   string // Chromium binary; default chromium on PATH
	NetLogDir string // if set, one Chromium NetLog per profile and DNS mode
	PcapDir   string // if set, the testbed's link captures (HOST-up.pcap, HOST-down.pcap)
	experiment.Env
}

func init() {
	experiment.Register(experiment.Info{Name: "web", Method: 1,
		Measures:   "Chromium page loads over HTTP/3 (1-RTT, 0-RTT) with the browser's DNS over each transport",
		Reproduces: "cross-layer paper §IV-C, Fig. 8-12; IMC 2022 slides (FCP and PLT relative to DoUDP)",
		Resumable:  true, Quick: "fiber and 4g, the example and wiki pages, 5 loads per cell",
		Doc: "page loads in Chromium over HTTP/3 (0-RTT and 1-RTT) with the\nbrowser's DNS through a stub over each transport, per profile",
		New: func() experiment.Experiment { return new(Web) }})
}

// Flags binds the web experiment's flags.
// Its defaults are the config's (defaults), so they have one home.
func (c *Web) Flags(fs *flag.FlagSet) {
	c.defaults() // a zero config is valid
	experiment.ListVar(fs, &c.Profiles, "profiles", c.Profiles, "access profiles (--quick: fiber,4g)")
	experiment.ListVar(fs, &c.Transports, "transports", c.Transports, "the stub's DNS transports: "+strings.Join(protocol.Default(), ", "))
	experiment.ListVar(fs, &c.H3, "h3", c.H3, "HTTP/3 handshakes: 1rtt (ticket dropped), 0rtt (ticket kept)")
	experiment.ListVar(fs, &c.Pages, "pages", c.Pages, "corpus pages")
	fs.Func("snapshot", "a directory of a page's files (index.html and what it loads) to add to the corpus; repeatable", func(dir string) error {
		c.Snapshots = append(c.Snapshots, dir)
		return nil
	})
	experiment.ListVar(fs, &c.StubStates, "stub", c.StubStates, "the stub's connection states: cold (a new connection per query), warm (kept from the warm-up)")
	experiment.ListVar(fs, &c.DNSModes, "dns", c.DNSModes, "stub (DNS in the browser's path), decoupled (measured apart and added, as the paper did), or both")
	experiment.ListVar(fs, &c.Engines, "engines", c.Engines, "what loads the pages: chromium, doxlab (doxlab's page loader, replaying each page's graph captured from Chromium; beside chromium, chosen among its measured loads), or both, compared")
	fs.StringVar(&c.Placement, "placement", c.Placement, "where a multi-origin page's origins are served: separate (a server per party, a certificate per origin) or cdn (one CDN edge, one certificate)")
	fs.BoolVar(&c.NoOrigin, "no-origin", false, "the servers send no ORIGIN frames (sent by default; on one CDN they spare a browser the lookups of announced origins)")
	experiment.CountVar(fs, &c.Repeat, "repeat", "`N` loads per cell")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "per page load")
	fs.Uint64Var(&c.Seed, "seed", 0, "task order (0: random)")
	fs.StringVar(&c.Browser, "browser", "", "the Chromium binary (default chromium on PATH)")
	fs.StringVar(&c.NetLogDir, "netlog", "", "a directory for Chromium's NetLogs")
	fs.StringVar(&c.PcapDir, "pcap", "", "a directory for the testbed's packet captures, per host and direction, as the emulator delivered them")
}

// Quick is a run of about two minutes that can earn the paper's claims:
// fiber and 4G, two pages, the 5 loads a cell's verdict needs
// (experiment.MinSamples).
func (c *Web) Quick() {
	c.Profiles = []string{"fiber", "4g"}
	c.Pages = []string{"example", "wiki"}
	c.Repeat = experiment.MinSamples
}

func (c *Web) defaults() error {
	def := func(l *[]string, d ...string) {
		if len(*l) == 0 {
			*l = d
		}
	}
	def(&c.Profiles, testbed.TableII...)
	def(&c.Transports, protocol.UDP, protocol.DoH2, protocol.DoQ)
	def(&c.H3, "1rtt", "0rtt")
	def(&c.Pages, corpus.Corpus...)
	def(&c.StubStates, "cold")
	def(&c.DNSModes, "stub")
	def(&c.Engines, pages.EngineChromium)
	if err := experiment.CheckValues("engine", c.Engines, pages.EngineChromium, pages.EngineDoxlab); err != nil {
		return err
	}
	if slices.Contains(c.Engines, pages.EngineDoxlab) && slices.Contains(c.DNSModes, "decoupled") {
		return fmt.Errorf("the doxlab engine resolves through the stub only: give --dns stub")
	}
	for _, t := range c.Transports {
		if !slices.Contains(protocol.Default(), t) {
			return fmt.Errorf("the stub forwards over %s, not %q", protocol.OneOf(protocol.Default()), t)
		}
	}
	if err := cmp.Or(experiment.CheckValues("h3 mode", c.H3, "1rtt", "0rtt"),
		experiment.CheckValues("stub state", c.StubStates, "cold", "warm"),
		experiment.CheckValues("dns mode", c.DNSModes, "stub", "decoupled")); err != nil {
		return err
	}
	if c.Placement == "" {
		c.Placement = pages.DefaultPlacement.Name
	}
	if _, ok := pages.Placements[c.Placement]; !ok {
		return fmt.Errorf("placement %q: want separate or cdn", c.Placement)
	}
	if c.Repeat <= 0 {
		c.Repeat = 10
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	c.Env.Defaults()
	return experiment.DefaultSelf(&c.Doxlab)
}

// setup labels the loads of a placement and ORIGIN frames other than
// the papers' (Task.Setup).
func (c *Web) setup() string {
	switch {
	case c.Placement == pages.CDNPlacement.Name && !c.NoOrigin:
		return c.Placement + "+origins"
	case c.Placement != pages.DefaultPlacement.Name:
		return c.Placement
	case c.NoOrigin:
		return "no-origin"
	}
	return ""
}

// webEnv is the running experiment: testbed, server, pages, browsers.
type webEnv struct {
	c       *Web
	tb      experiment.Net
	srv     *server.Server // in host server: the resolver, and the one-origin pages
	srvs    pages.Servers  // srv, and the multi-origin pages' server hosts
	ip      string
	ca      string
	pages   map[string]corpus.Page
	st      *store.Store
	browser map[string]*browser.Browser  // per DNS mode, and captureBrowser
	roots   *x509.CertPool               // the server's certificate, for the page loader
	runID   string                       // the profile's run
	graphs  map[string]*pageload.Graph   // by profile and page, captured in this process
	pool    map[string][]*pageload.Graph // by profile and page: the graphs of Chromium's measured loads
	keyLog  string                       // the page servers' TLS secrets (tls.key_log), to decrypt captures
	// etc are the browser's own files over /etc where the client host has
	// none of its own (the loopback net): resolv.conf names the stub.
	etc map[string]string

	srvRecords server.RecordLog // the server's query records and web connection records
}

// Run runs the experiment and returns its ID (the prefix of its runs).
func (c *Web) Run(ctx context.Context) (string, error) {
	started := time.Now()
	if err := c.defaults(); err != nil {
		return "", experiment.BadDesign(err)
	}
	profiles, err := testbed.LookupProfiles(c.Profiles)
	if err != nil {
		return "", experiment.BadDesign(err)
	}
	// After the design's checks: a design wrong on a machine without
	// Chromium is still a usage error.
	if _, err := browser.FindExec(c.Browser); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "doxlab-web")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	all, err := corpus.Extract(filepath.Join(dir, "pages"))
	if err != nil {
		return "", err
	}
	for _, d := range c.Snapshots {
		p, err := corpus.Snapshot(d, dir)
		if err != nil {
			return "", err
		}
		all = append(all, p)
		if !slices.Contains(c.Pages, p.Name) {
			c.Pages = append(c.Pages, p.Name)
		}
	}
	chosen, err := corpus.Select(all, c.Pages)
	if err != nil {
		return "", err
	}
	for _, p := range chosen {
		if !p.MultiOrigin() {
			continue
		}
		if slices.Contains(c.DNSModes, "decoupled") {
			return "", fmt.Errorf("page %s loads from %d origins: decoupled DNS measures one lookup apart; give --dns stub", p.Name, len(p.Origins))
		}
	}
	place := pages.Placements[c.Placement]
	servers := place.Hosts(chosen)
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "web", Hosts: append([]string{"client", "server"}, servers...),
		HostNameservers: map[string]string{"client": "127.0.0.1"}, PcapDir: c.PcapDir})
	if err != nil {
		return "", err
	}
	defer closeAll()
	if err := place.Apply(tb, servers); err != nil {
		return "", err
	}
	e := &webEnv{c: c, tb: tb, ip: tb.IP("server"), st: st, pages: map[string]corpus.Page{}, browser: map[string]*browser.Browser{},
		graphs: map[string]*pageload.Graph{}, pool: map[string][]*pageload.Graph{}, keyLog: filepath.Join(dir, "keys.log")}
	if err := e.startServers(chosen, dir, place); err != nil {
		return "", err
	}
	if tb.NetNS("client") == "" {
		if e.etc, err = stubEtc(dir, tb.Local("client")); err != nil {
			return "", err
		}
	}
	defer e.srvs.Close()
	defer e.closeBrowsers(true)

	expID, err := c.ExperimentID("web")
	if err != nil {
		return "", err
	}
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	spec := map[string]any{"server": e.srv.Config(), "servers": e.srvs.Configs(), "placement": place, "origin_frames": !c.NoOrigin, "transports": c.Transports, "h3": c.H3, "pages": c.Pages, "stub_states": c.StubStates, "dns_modes": c.DNSModes, "engines": c.Engines,
		"repeat": c.Repeat, "seed": seed, "browser": e.browserVersion(ctx)}
	c.Plan(len(profiles) * len(c.Transports) * len(c.StubStates) * len(c.Pages) * len(c.H3) * len(c.DNSModes) * len(c.Engines) * c.Repeat)
	err = c.EachProfile(ctx, st, tb, expID, "experiment:web", profiles, spec, func(p testbed.Profile, runID string) error {
		done, err := st.ResultsDone(ctx, runID, Kind)
		if err != nil {
			return err
		}
		c.Advance(len(done))
		e.runID = runID
		// A run's graphs come from its own loads and are stored with it:
		// a run measured again after a failed link check chooses and
		// stores them anew (the first run's are superseded with it).
		clear(e.graphs)
		clear(e.pool)
		if err := e.profile(ctx, rng, p, runID, done); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		return nil
	})
	c.logRate(st, expID, started)
	return expID, err
}

// logRate logs how many loads this Run measured per minute, the
// testbed's and browser's start included: what a campaign can plan on.
func (c *Web) logRate(st *store.Store, expID string, started time.Time) {
	loads, err := ReadLoads(context.Background(), st, expID+"-")
	if err != nil {
		return
	}
	n := 0
	for _, x := range loads {
		if x.Start.After(started) {
			n++
		}
	}
	el := time.Since(started)
	fmt.Fprintf(c.Log, "%.1f measured page loads per minute (each after a warm-up load): %d in %.0f s, testbed and browser start included\n", float64(n)/el.Minutes(), n, el.Seconds())
}

// startServers runs doxlab's server in the server host: every DNS
// transport, the pages over HTTP/3 (and HTTP/2) on 443 with DoH on the
// same listener, one TLS identity for all, the page hosts answered with
// the address of the host serving them; and, for multi-origin pages, a
// server in each host place puts their origins on.
func (e *webEnv) startServers(chosen []corpus.Page, dir string, place pages.Placement) error {
	for _, p := range chosen {
		e.pages[p.Name] = p
	}
	cfgs := pages.PageServers(e.tb.IP, chosen, false, place)
	for _, c := range cfgs {
		c.Web.NoOrigin = e.c.NoOrigin
	}
	if slices.Contains(e.c.Engines, pages.EngineDoxlab) {
		for _, c := range cfgs {
			c.TLS.KeyLog = e.keyLog // decrypts the graph captures' packets
		}
	}
	var err error
	if e.srvs, err = pages.StartPageServers(e.tb, cfgs); err != nil {
		return err
	}
	e.srv = e.srvs["server"]
	e.srvs.OnRecord(func(r *server.Record) {
		if r.Kind == "query" || (r.Kind == "conn" && r.Listener == "web") {
			e.srvRecords.Add(r)
		}
	})
	e.roots = x509.NewCertPool()
	e.roots.AppendCertsFromPEM(e.srvs.CertPEM())
	e.ca = filepath.Join(dir, "server.pem")
	return os.WriteFile(e.ca, e.srvs.CertPEM(), 0o644)
}

func (e *webEnv) url(p corpus.Page) string { return "https://" + p.Host + "/" }

// browserFor returns the browser of a DNS mode, starting one if the
// current stub has none yet. In
// decoupled mode the browser resolves nothing: the page hosts are mapped
// to the server, as the paper's setup did. A browser it starts loads
// warm once, unmeasured, when warm is not nil: a browser's first page
// costs it more work than the next. Without, the first measured load of
// each stub's browser was 5 and 8 % slower than its cell's median on
// average (two runs of 180 cells), and fiber's first graph capture made
// the one-resource page's replay 20-31 % slower than Chromium.
func (e *webEnv) browserFor(ctx context.Context, mode string, warm *corpus.Page) (*browser.Browser, error) {
	if b, ok := e.browser[mode]; ok {
		return b, nil
	}
	opts := browser.Options{Exec: e.c.Browser, NetNS: e.tb.NetNS("client"), SPKI: e.srvs.SPKIs(), Etc: e.etc}
	for _, p := range e.pages {
		for _, h := range p.Hostnames() {
			if o := h + ":443"; !slices.Contains(opts.ForceQUIC, o) {
				opts.ForceQUIC = append(opts.ForceQUIC, o)
			}
		}
	}
	slices.Sort(opts.ForceQUIC) // one browser's flags, whatever the map's order
	if mode == "decoupled" {
		opts.Flags = append(opts.Flags, "host-resolver-rules=MAP *."+corpus.Domain+" "+e.ip)
	}
	if e.c.NetLogDir != "" {
		opts.NetLog = filepath.Join(e.c.NetLogDir, fmt.Sprintf("netlog-%s-%d.json", mode, time.Now().UnixNano()))
	}
	b, err := browser.Launch(ctx, opts)
	if err != nil {
		return nil, err
	}
	e.browser[mode] = b
	if warm != nil && b.Reset(ctx, true) == nil {
		b.Load(ctx, e.url(*warm), e.c.Timeout) // a broken browser shows in the next Reset
	}
	return b, nil
}

func (e *webEnv) browserVersion(ctx context.Context) string {
	b, err := e.browserFor(ctx, "stub", nil)
	if err != nil {
		return ""
	}
	return b.Version()
}

// profile measures every task of one access profile: per stub
// configuration (in random order) a stub, then its tasks in random order.
func (e *webEnv) profile(ctx context.Context, rng *rand.Rand, p testbed.Profile, runID string, done map[string]bool) error {
	if !e.replaysBrowser() {
		return e.blocks(ctx, rng, p, runID, done, e.c.Engines)
	}
	// The browser's loads first, each traced, then the replays of the
	// graph chosen among them (graph).
	if err := e.poolGraphs(ctx, p.Name, runID); err != nil {
		return err
	}
	if err := e.blocks(ctx, rng, p, runID, done, []string{pages.EngineChromium}); err != nil {
		return err
	}
	return e.blocks(ctx, rng, p, runID, done, []string{pages.EngineDoxlab})
}

// blocks measures the profile's tasks for engines, a block per stub
// (DNS transport and state) in random order.
func (e *webEnv) blocks(ctx context.Context, rng *rand.Rand, p testbed.Profile, runID string, done map[string]bool, engines []string) error {
	type block struct{ tr, state string }
	var blocks []block
	for _, t := range e.c.Transports {
		for _, s := range e.c.StubStates {
			blocks = append(blocks, block{t, s})
		}
	}
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	for _, bl := range blocks {
		var tasks []pages.Task
		for _, page := range e.c.Pages {
			for _, h3 := range e.c.H3 {
				for _, mode := range e.c.DNSModes {
					for _, engine := range engines {
						for rep := range e.c.Repeat {
							t := pages.Task{Profile: p.Name, Page: page, Transport: bl.tr, StubState: bl.state, H3: h3, DNSMode: mode, Setup: e.c.setup(), Rep: rep}
							if engine != pages.EngineChromium {
								t.Engine = engine
							}
							if !done[t.Key()] {
								tasks = append(tasks, t)
							}
						}
					}
				}
			}
		}
		if len(tasks) == 0 {
			continue
		}
		rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
		st, err := e.startStub(ctx, bl.tr, bl.state)
		if err != nil {
			return err
		}
		// A new stub is a new DNS configuration, though the browser
		// cannot tell: the stub listens where the last one did. Chromium
		// resends a query once the answer is later than the 99th
		// percentile of its server's earlier answers, and forgets them
		// on a configuration change. A browser of its own per stub keeps
		// the cells before from deciding its resends.
		e.closeBrowsers(false)
		start := time.Now()
		ok := 0
		for _, t := range tasks {
			if err := ctx.Err(); err != nil {
				st.stop()
				return err
			}
			x, err := e.sample(ctx, st, t)
			if err != nil {
				st.stop()
				return err
			}
			if err := WriteLoad(ctx, e.st, runID, x); err != nil {
				st.stop()
				return err
			}
			e.c.Advance(1)
			if x.Status == "ok" {
				ok++
			} else {
				fmt.Fprintf(e.c.Log, "web: %s: %s %s\n", t.Key(), x.Status, x.Error)
			}
		}
		st.stop()
		el := time.Since(start)
		fmt.Fprintf(e.c.Log, "web: %s dns=%s/%s: %d/%d loads ok in %.0f s (%.1f samples/min, each a warm-up and a measured load)\n",
			p.Name, bl.tr, bl.state, ok, len(tasks), el.Seconds(), float64(len(tasks))/el.Minutes())
	}
	return nil
}

// sample is one task: a warm-up navigation (the resolver's cache, the
// ticket and, when warm, the stub's connection are warmed), then the
// browser's HTTP and host caches are cleared and its connections closed,
// keeping the ticket for 0-RTT or dropping it for 1-RTT, then the
// measured navigation. An error is returned only when the browser itself
// is lost; a failed page is a failed sample.
func (e *webEnv) sample(ctx context.Context, st *stub, t pages.Task) (*pages.Sample, error) {
	if t.EngineName() == pages.EngineDoxlab {
		return e.replay(ctx, st, t)
	}
	page := e.pages[t.Page]
	b, err := e.browserFor(ctx, t.DNSMode, &page)
	if err != nil {
		return nil, err
	}
	fail := func(status string, err error) *pages.Sample {
		return &pages.Sample{Task: t, Start: time.Now(), Status: status, Error: err.Error()}
	}
	if err := b.Reset(ctx, true); err != nil {
		return e.restart(ctx, t, err)
	}
	warm := b.Load(ctx, e.url(page), e.c.Timeout)
	if t.DNSMode == "decoupled" {
		e.lookup(page.Host) // the stub's connection, when warm
	}
	if err := b.Reset(ctx, t.H3 == "1rtt"); err != nil {
		return e.restart(ctx, t, err)
	}
	if warm.Status != browser.LoadOK {
		return fail("warm-up-failed", fmt.Errorf("warm-up: %s %s", warm.Status, warm.Error)), nil
	}
	var dnsMs float64
	var dnsErr error
	if t.DNSMode == "decoupled" {
		dnsMs, dnsErr = e.lookup(page.Host)
	}
	e.srvs.Settle(ctx) // the warm-up's records before the mark (see replay)
	sm, cm := st.records.Mark(), e.srvRecords.Mark()
	var l *browser.Load
	var tr *browser.NetTrace
	if e.replaysBrowser() {
		// Traced, for the replays' graph: tracing and sniffing cost the
		// load nothing measurable (80 loads on fiber, every other one
		// traced: medians 1.3 % faster traced, within their spread).
		if l, tr, err = e.trace(ctx, b, page); err != nil {
			return e.restart(ctx, t, err)
		}
	} else {
		l = b.Load(ctx, e.url(page), e.c.Timeout)
	}
	time.Sleep(50 * time.Millisecond) // the last records through the stub's pipe
	e.srvs.Settle(ctx)                // and the servers' records of the load's connections
	x := pages.Assemble(t, l, page.Hostnames(), st.records.Since(sm), pages.BegunSince(e.srvRecords.Since(cm), l.Start))
	x.WarmUp = warm
	if tr != nil && l.Status == browser.LoadOK {
		x.Graph, err = capture.FromTrace(e.url(page), l, tr, pageload.Provenance{Browser: b.Version(), Profile: t.Profile, At: x.Start.UTC()})
		if err != nil {
			fmt.Fprintf(e.c.Log, "web: %s: no graph: %v\n", t.Key(), err)
		} else {
			key := graphKey(t.Profile, t.Page)
			e.pool[key] = append(e.pool[key], x.Graph)
		}
	}
	if t.DNSMode == "decoupled" {
		if dnsErr != nil {
			return fail("dns-failed", dnsErr), nil
		}
		x.Decouple(dnsMs)
	}
	return x, nil
}

// closeBrowsers ends the browsers of the measured loads, or all; the
// next sample starts its own.
func (e *webEnv) closeBrowsers(all bool) {
	for mode, b := range e.browser {
		if mode == captureBrowser && !all {
			continue
		}
		b.Close()
		delete(e.browser, mode)
	}
}

// restart replaces a browser that stopped answering; the task is stored
// as failed with the reason.
func (e *webEnv) restart(ctx context.Context, t pages.Task, cause error) (*pages.Sample, error) {
	if b, ok := e.browser[t.DNSMode]; ok {
		b.Close()
		delete(e.browser, t.DNSMode)
	}
	page := e.pages[t.Page]
	if _, err := e.browserFor(ctx, t.DNSMode, &page); err != nil {
		return nil, fmt.Errorf("restarting the browser after %w: %w", cause, err)
	}
	return &pages.Sample{Task: t, Start: time.Now(), Status: "browser-error", Error: cause.Error()}, nil
}

// inClient makes sockets inside the client host.
func (e *webEnv) inClient(open func() error) error { return e.tb.Run("client", open) }

// stubEtc writes, into dir, the files over /etc that point a browser at
// the stub on addr: a page worker's, and on the loopback net the web
// experiment's (the testbed's client host has them of its own).
func stubEtc(dir, addr string) (map[string]string, error) {
	etc := map[string]string{}
	for name, body := range map[string]string{
		// One try, no search list: a lookup the stub fails is the
		// sample's, not retried elsewhere.
		"resolv.conf":   "nameserver " + addr + "\noptions timeout:10 attempts:1\n",
		"hosts":         "127.0.0.1 localhost\n::1 localhost\n",
		"nsswitch.conf": "hosts: files dns\n",
	} {
		etc[name] = filepath.Join(dir, "etc-"+name)
		if err := os.WriteFile(etc[name], []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	return etc, nil
}

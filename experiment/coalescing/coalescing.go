// Package coalescing is the coalescing experiment: doxlab's page loader
// loads the corpus pages over HTTP/3 with the page's name resolved over
// a connection of its own (each DNS transport), measured apart and added
// (the cross-layer paper's emulated coalescing), or on the page's own
// QUIC connection (DoH/3 and DNS streams: real coalescing), cold and in
// 0-RTT, per access profile, each sample with the proof of what really
// happened from the server's records.
package coalescing

import (
	"cmp"
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// The DNS modes besides the transports (DoUDP, DoH/2, DoQ, DoH/3, ...,
// each on a connection of its own).
const (
	// Emulated is the cross-layer paper's emulated coalescing: a DoQ
	// lookup measured apart, on its own connection, added to a load that
	// resolves nothing.
	Emulated = "doq-emulated"
	// DoH3Coalesced resolves by DoH/3 on the page's own connection.
	DoH3Coalesced = "doh3-coalesced"
	// DNSStream resolves on a DNS stream of the page's own connection.
	DNSStream = "dnsstream"
)

// Coalesced says whether a DNS mode resolves on the page's connection.
func Coalesced(mode string) bool { return mode == DoH3Coalesced || mode == DNSStream }

// Coalescing is the experiment's config.
type Coalescing struct {
	Profiles []string // default: Table II's five
	Pages    []string // corpus pages, each replayed from its shipped graph; default all
	// DNS are the DNS modes: transports (a connection of their own),
	// doq-emulated, doh3-coalesced and dnsstream.
	DNS []string
	H3  []string // 1rtt, 0rtt (default both)
	// Settings are how 0-RTT loads treat the server's HTTP/3 SETTINGS:
	// remembered (sent at once, RFC 9114 §7.2.4.2) and wait (held until
	// they arrive). 1-RTT loads have them by the time they send.
	Settings []string
	// HTTPSRecords has the loader ask each host's HTTPS record first and
	// skip the A lookup on its hints (the server publishes one per page).
	HTTPSRecords bool
	// Origins has the loader use the server's ORIGIN frame: an announced
	// origin needs no lookup (on a coalesced connection, the lookup races
	// the frame).
	Origins bool
	// Placement lays a multi-origin page's origins out: "separate" (the
	// first party, CDN hosts and third parties on servers of their own,
	// a certificate per origin) or "cdn" (every origin on one CDN edge
	// with one certificate); see pages.Placement.
	Placement string
	Repeat    int // loads per cell; default 10
	Timeout   time.Duration
	Seed      uint64 // task order; 0: random
	experiment.Env
}

func init() {
	experiment.Register(experiment.Info{Name: "coalescing", Method: 1,
		Measures:   "doxlab's page loader with the page's DNS on its own connection, emulated as the paper did, or coalesced on the page's QUIC connection (DoH/3, DNS streams), with a proof per load",
		Reproduces: "cross-layer paper §I Fig. 1b, §IV-C, §VI",
		Resumable:  true, Quick: "fiber and 4g, the wiki page, five DNS modes, 0-RTT with SETTINGS remembered and awaited, 5 loads per cell",
		Doc: "doxlab's page loader over HTTP/3 with the page's DNS on a connection\nof its own, emulated as the paper did, or on the page's own QUIC\nconnection (DoH/3, DNS streams), with the proof per load",
		New: func() experiment.Experiment { return new(Coalescing) }})
}

// Flags binds the experiment's flags; its defaults are the config's.
func (c *Coalescing) Flags(fs *flag.FlagSet) {
	c.defaults()
	experiment.ListVar(fs, &c.Profiles, "profiles", c.Profiles, "access profiles (--quick: fiber,4g)")
	experiment.ListVar(fs, &c.Pages, "pages", c.Pages, "corpus pages (--quick: wiki)")
	experiment.ListVar(fs, &c.DNS, "dns", c.DNS, "DNS modes: transports ("+strings.Join(protocol.Default(), ", ")+"), "+Emulated+", "+DoH3Coalesced+", "+DNSStream)
	experiment.ListVar(fs, &c.H3, "h3", c.H3, "HTTP/3 handshakes: 1rtt (ticket dropped), 0rtt (ticket kept)")
	experiment.ListVar(fs, &c.Settings, "settings", c.Settings, "0-RTT loads' SETTINGS: remembered (sent at once), wait (held for the server's)")
	fs.BoolVar(&c.HTTPSRecords, "https-records", false, "ask each host's HTTPS record first; its hints spare the A lookup")
	fs.BoolVar(&c.Origins, "origins", false, "use the server's ORIGIN frames: an announced origin needs no lookup")
	fs.StringVar(&c.Placement, "placement", c.Placement, "where a multi-origin page's origins are served: separate (a server per party, a certificate per origin) or cdn (one CDN edge, one certificate)")
	experiment.CountVar(fs, &c.Repeat, "repeat", "`N` loads per cell")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "per page load")
	fs.Uint64Var(&c.Seed, "seed", 0, "task order (0: random)")
}

// Quick is a run of about a minute and a half that can earn the claims:
// the 5 loads a cell's verdict needs (experiment.MinSamples), and both
// SETTINGS treatments, which the claim on waiting for them compares.
func (c *Coalescing) Quick() {
	c.Profiles = []string{"fiber", "4g"}
	c.Pages = []string{"wiki"}
	c.DNS = []string{protocol.UDP, protocol.DoH2, Emulated, DoH3Coalesced, DNSStream}
	c.Settings = []string{"remembered", "wait"}
	c.Repeat = experiment.MinSamples
}

func (c *Coalescing) defaults() error {
	def := func(l *[]string, d ...string) {
		if len(*l) == 0 {
			*l = d
		}
	}
	def(&c.Profiles, testbed.TableII...)
	def(&c.Pages, corpus.Corpus...)
	def(&c.DNS, protocol.UDP, protocol.DoH2, protocol.DoQ, protocol.DoH3, Emulated, DoH3Coalesced, DNSStream)
	def(&c.H3, "1rtt", "0rtt")
	def(&c.Settings, "remembered", "wait")
	for _, m := range c.DNS {
		if !slices.Contains(protocol.Default(), m) && m != Emulated && !Coalesced(m) {
			return fmt.Errorf("DNS mode %q: want %s, %s, %s or %s", m, protocol.OneOf(protocol.Default()), Emulated, DoH3Coalesced, DNSStream)
		}
	}
	if err := cmp.Or(experiment.CheckValues("h3 mode", c.H3, "1rtt", "0rtt"),
		experiment.CheckValues("settings", c.Settings, "remembered", "wait")); err != nil {
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
	return nil
}

// setup names what the run's flags change about every load: the
// placement of a multi-origin page's origins when not the default, ORIGIN
// frames, HTTPS records ("cdn+origins+https"; "" for none), so that cells
// of runs set up differently stay apart.
func (c *Coalescing) setup() string {
	var parts []string
	if c.Placement != pages.DefaultPlacement.Name {
		parts = append(parts, c.Placement)
	}
	if c.Origins {
		parts = append(parts, "origins")
	}
	if c.HTTPSRecords {
		parts = append(parts, "https")
	}
	return strings.Join(parts, "+")
}

// Task is one page load of the experiment.
type Task struct {
	Profile  string `json:"profile"`
	Page     string `json:"page"`
	DNS      string `json:"dns"`      // a transport, doq-emulated, doh3-coalesced or dnsstream
	H3       string `json:"h3"`       // 1rtt or 0rtt
	Settings string `json:"settings"` // remembered or wait
	Rep      int    `json:"rep"`
}

// Key names the task within a run, for resuming.
func (t Task) Key() string {
	return fmt.Sprintf("%s|%s|%s|%s|%s|%d", t.Profile, t.Page, t.DNS, t.H3, t.Settings, t.Rep)
}

// Kind is the stored samples' kind.
var Kind = store.NewKind("coalescing-load")

// env is the running experiment.
type env struct {
	c      *Coalescing
	tb     experiment.Net
	st     *store.Store
	ip     string
	client string
	roots  *x509.CertPool
	pages  map[string]corpus.Page
	graphs map[string]*pageload.Graph
	recs   server.RecordLog
}

// Run runs the experiment and returns its ID.
func (c *Coalescing) Run(ctx context.Context) (string, error) {
	started := time.Now()
	if err := c.defaults(); err != nil {
		return "", experiment.BadDesign(err)
	}
	profiles, err := testbed.LookupProfiles(c.Profiles)
	if err != nil {
		return "", experiment.BadDesign(err)
	}
	e := &env{c: c, pages: map[string]corpus.Page{}, graphs: map[string]*pageload.Graph{}}
	for _, name := range c.Pages {
		if e.graphs[name], err = corpus.Graph(name); err != nil {
			return "", err
		}
	}
	dir, err := os.MkdirTemp("", "doxlab-coalescing")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	chosen, err := c.choosePages(dir)
	if err != nil {
		return "", err
	}
	place := pages.Placements[c.Placement]
	servers := place.Hosts(chosen)
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "coalescing", Hosts: append([]string{"client", "server"}, servers...)})
	if err != nil {
		return "", err
	}
	defer closeAll()
	if err := place.Apply(tb, servers); err != nil {
		return "", err
	}
	e.tb, e.st, e.ip, e.client = tb, st, tb.IP("server"), tb.IP("client")
	for _, p := range chosen {
		e.pages[p.Name] = p
	}
	srvs, err := pages.StartPageServers(tb, pages.PageServers(tb.IP, chosen, true, place))
	if err != nil {
		return "", err
	}
	defer srvs.Close()
	srv := srvs["server"]
	srvs.OnRecord(e.recs.Add)
	e.roots = x509.NewCertPool()
	e.roots.AppendCertsFromPEM(srvs.CertPEM())

	expID, err := c.ExperimentID("coalescing")
	if err != nil {
		return "", err
	}
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	spec := map[string]any{"server": srv.Config(), "servers": srvs.Configs(), "placement": place, "pages": c.Pages, "dns": c.DNS, "h3": c.H3, "settings": c.Settings, "https_records": c.HTTPSRecords, "origins": c.Origins, "repeat": c.Repeat, "seed": seed,
		"graphs": e.provenance()}
	n := 0
	perProfile := c.loadsPerProfile()
	c.Plan(perProfile * len(profiles))
	err = c.EachProfile(ctx, st, tb, expID, "experiment:coalescing", profiles, spec, func(p testbed.Profile, runID string) error {
		done, err := st.ResultsDone(ctx, runID, Kind)
		if err != nil {
			return err
		}
		// A cell's loads run one after another behind one warm-up (the
		// loader keeps no state a load does not renew: tickets, the
		// remembered SETTINGS), the cells in random order.
		c.Advance(len(done))
		cells := c.cells(p.Name, done)
		rng.Shuffle(len(cells), func(i, j int) { cells[i], cells[j] = cells[j], cells[i] })
		loaded, err := e.measureCells(ctx, p.Name, runID, cells, max(5*time.Millisecond, p.RTT()))
		n += loaded
		return err
	})
	el := time.Since(started)
	fmt.Fprintf(c.Log, "%.1f measured page loads per minute (each after a warm-up load): %d in %.0f s, testbed start included\n", float64(n)/el.Minutes(), n, el.Seconds())
	return expID, err
}

// choosePages extracts the corpus into dir and selects the config's
// pages; a page over several origins cannot take a DNS mode that puts its
// lookups on the resolver's own connection.
func (c *Coalescing) choosePages(dir string) ([]corpus.Page, error) {
	all, err := corpus.Extract(filepath.Join(dir, "pages"))
	if err != nil {
		return nil, err
	}
	chosen, err := corpus.Select(all, c.Pages)
	if err != nil {
		return nil, err
	}
	for _, p := range chosen {
		for _, m := range c.DNS {
			if p.MultiOrigin() && (m == Emulated || Coalesced(m)) {
				return nil, fmt.Errorf("page %s loads from %d origins on servers other than the resolver: DNS mode %s needs the page on the resolver's server; give DNS transports", p.Name, len(p.Origins), m)
			}
		}
	}
	return chosen, nil
}

// loadsPerProfile is how many loads a profile's run measures: a 1-RTT
// load has one SETTINGS variant, the others one per setting.
func (c *Coalescing) loadsPerProfile() int {
	n := 0
	for range c.Pages {
		for range c.DNS {
			for _, h3 := range c.H3 {
				if h3 == "1rtt" {
					n += c.Repeat // one SETTINGS variant
				} else {
					n += len(c.Settings) * c.Repeat
				}
			}
		}
	}
	return n
}

// cells are the profile's tasks not done yet, a cell per page, DNS mode,
// handshake and SETTINGS variant, its repetitions together.
func (c *Coalescing) cells(profile string, done map[string]bool) [][]Task {
	var cells [][]Task
	for _, page := range c.Pages {
		for _, mode := range c.DNS {
			for _, h3 := range c.H3 {
				for _, set := range c.Settings {
					if h3 == "1rtt" && set != c.Settings[0] {
						continue // a 1-RTT load has the SETTINGS before it sends: one variant
					}
					var cell []Task
					for rep := range c.Repeat {
						if t := (Task{profile, page, mode, h3, set, rep}); !done[t.Key()] {
							cell = append(cell, t)
						}
					}
					if len(cell) > 0 {
						cells = append(cells, cell)
					}
				}
			}
		}
	}
	return cells
}

// measureCells measures each cell in turn and stores each load as it
// comes; it returns how many loads it measured.
func (e *env) measureCells(ctx context.Context, profile, runID string, cells [][]Task, settle time.Duration) (n int, err error) {
	c, st := e.c, e.st
	ok := 0
	for _, cell := range cells {
		for s := range e.cell(ctx, cell, settle) {
			if err := st.WriteResult(ctx, runID, Kind, s.Key(), s.Start, s); err != nil {
				return n, err
			}
			c.Advance(1)
			n++
			if s.Status == "ok" {
				ok++
			} else {
				fmt.Fprintf(c.Log, "coalescing: %s: %s %s\n", s.Key(), s.Status, s.Error)
			}
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
	}
	fmt.Fprintf(c.Log, "coalescing: %s: %d/%d loads ok\n", profile, ok, n)
	return n, nil
}

// provenance says where each page's graph comes from, for the run's spec.
func (e *env) provenance() map[string]pageload.Provenance {
	out := map[string]pageload.Provenance{}
	for name, g := range e.graphs {
		out[name] = g.Captured
	}
	return out
}

// inClient makes sockets inside the client host.
func (e *env) inClient(open func() error) error { return e.tb.Run("client", open) }

// cell measures one cell's tasks (its repetitions): a warm-up load (the
// tickets, the remembered SETTINGS, the server's cache), then each task's
// load, the tickets dropped before each for 1-RTT, each labelled with the
// server's records of its window. It stops early when ctx ends.
func (e *env) cell(ctx context.Context, tasks []Task, settle time.Duration) iter.Seq[*Sample] {
	return func(yield func(*Sample) bool) {
		t := tasks[0]
		page, g := e.pages[t.Page], e.graphs[t.Page]
		zero := t.H3 == "0rtt"
		failAll := func(status string, err error) {
			for _, t := range tasks {
				if !yield(&Sample{Task: t, Start: time.Now(), Status: status, Error: err.Error()}) {
					return
				}
			}
		}
		cfg := pageload.Config{ZeroRTT: zero, WaitSettings: zero && t.Settings == "wait", HTTPSRecords: e.c.HTTPSRecords, Origins: e.c.Origins, RootCAs: e.roots, OpenSockets: e.inClient, Timeout: e.c.Timeout,
			AllowSpecial: experiment.OwnBlock(e.tb, "server")}
		tickets := newDNSTickets()
		var sdns *sessionDNS // the separate modes' resolver
		loadDone := func() {
			if sdns != nil {
				sdns.done()
			}
		}
		switch {
		case Coalesced(t.DNS):
			mode := pageload.CoalesceDoH3
			if t.DNS == DNSStream {
				mode = pageload.CoalesceDNSStream
			}
			cfg.Coalesce = &pageload.Coalesce{Mode: mode, Server: netip.AddrPortFrom(netip.MustParseAddr(e.ip), 443), Name: e.ip}
		case t.DNS == Emulated:
			cfg.Resolver = pageload.Hosts{page.Host: netip.MustParseAddr(e.ip)}
		default:
			sdns = &sessionDNS{e: e, name: t.DNS, zero: zero, tickets: tickets}
			cfg.Resolver = sdns
		}
		l, err := pageload.New(cfg)
		if err != nil {
			failAll("error", err)
			return
		}
		// The emulation's DoQ lookup, apart from the load, on a connection
		// of its own.
		lookupApart := func() (*transport.Record, error) {
			tr, err := e.transport(protocol.DoQ, zero, false, tickets.s)
			if err != nil {
				return nil, err
			}
			defer tr.Close()
			q := new(dns.Msg)
			q.SetQuestion(dns.Fqdn(page.Host), dns.TypeA)
			rec, err := tr.Exchange(ctx, q)
			if err == nil && rec.Rcode != "NOERROR" {
				err = fmt.Errorf("DoQ lookup of %s: %s", page.Host, rec.Rcode)
			}
			return rec, err
		}
		if t.DNS == Emulated {
			if _, err := lookupApart(); err != nil {
				failAll("warm-up-failed", err)
				return
			}
		}
		warm := l.Load(ctx, g)
		loadDone()
		if warm.Status != "ok" {
			failAll("warm-up-failed", fmt.Errorf("warm-up: %s %s", warm.Status, warm.Error))
			return
		}
		for _, t := range tasks {
			if ctx.Err() != nil {
				return
			}
			if !zero {
				l.Forget()
				tickets.forget()
			}
			s := &Sample{Task: t, Setup: e.c.setup()}
			mark := e.recs.Mark()
			s.Start = time.Now()
			if t.DNS == Emulated {
				rec, err := lookupApart()
				if s.Apart = rec; err != nil {
					s.Status, s.Error = "dns-failed", err.Error()
					if !yield(s) {
						return
					}
					continue
				}
			}
			r := l.Load(ctx, g)
			loadDone()
			// The server writes a connection's record as its handshake
			// completes: in 0-RTT when the client's Finished arrives, which
			// can be half a round trip after a short load ended.
			time.Sleep(settle)
			s.Load, s.Status, s.Error = r, r.Status, r.Error
			s.Server = e.recs.Since(mark)
			s.prove(page.Host, e.client)
			if !yield(s) {
				return
			}
		}
	}
}

// transport is a DNS transport to the server from the client host,
// resuming with sess's tickets (in 0-RTT if zero); with reuse, one
// connection carries every exchange until it is closed.
func (e *env) transport(name string, zero, reuse bool, sess *transport.Session) (transport.Transport, error) {
	u, err := measure.URLFor(name, e.ip)
	if err != nil {
		return nil, err
	}
	return transport.New(u, transport.Options{Timeout: e.c.Timeout, RootCAs: e.roots, OpenSockets: e.inClient, Session: sess, ZeroRTT: zero, Reuse: reuse})
}

// dnsTickets are a cell's DNS transports' tickets: they live as long as
// the loader's, kept for 0-RTT and dropped with them for 1-RTT.
type dnsTickets struct{ s *transport.Session }

func newDNSTickets() *dnsTickets {
	t := &dnsTickets{}
	t.forget()
	return t
}

func (t *dnsTickets) forget() { t.s = transport.NewSession(transport.SessionConfig{Tickets: true}) }

// sessionDNS is the loader's resolver for the separate modes: a DNS
// connection of its own per load (opened by its first lookup, closed
// with done), resuming with the cell's DNS tickets, as a browser
// keeps its DNS connection for a page's lookups.
type sessionDNS struct {
	e       *env
	name    string
	zero    bool
	tickets *dnsTickets

	mu sync.Mutex
	tr transport.Transport
}

func (d *sessionDNS) Resolve(ctx context.Context, host string) ([]netip.Addr, *pageload.Lookup, error) {
	return d.dns().Resolve(ctx, host)
}

// Exchange lets the loader ask for HTTPS records.
func (d *sessionDNS) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, any, error) {
	return d.dns().Exchange(ctx, q)
}

func (d *sessionDNS) Label() string { return d.name }

// dns is the load's DNS transport, opened on first use.
func (d *sessionDNS) dns() *pageload.DNS {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tr == nil {
		tr, err := d.e.transport(d.name, d.zero, true, d.tickets.s)
		if err != nil {
			tr = failing{err}
		}
		d.tr = tr
	}
	return &pageload.DNS{Name: d.name, Transport: d.tr}
}

// done closes the load's DNS connection.
func (d *sessionDNS) done() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tr != nil {
		d.tr.Close()
		d.tr = nil
	}
}

// failing is a transport that could not be made: every exchange fails
// with why.
type failing struct{ err error }

func (f failing) Exchange(context.Context, *dns.Msg) (*transport.Record, error) {
	return &transport.Record{Status: transport.Classify(f.err), Error: f.err.Error()}, f.err
}
func (f failing) Close() error { return nil }

package pageload

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/printable"
)

// Resolver looks a host name up for a load and says how: its lookup is
// part of the load's record.
type Resolver interface {
	Resolve(ctx context.Context, host string) ([]netip.Addr, *Lookup, error)
}

// Config is how a Loader fetches.
type Config struct {
	// Protocol is "h3" (HTTP/3 over QUIC, the default) or "h2" (HTTP/2
	// over TLS over TCP) for every origin, or "auto": HTTP/3 where the
	// origin's HTTPS record or an earlier Alt-Svc header offered it, as a
	// browser discovers it, HTTP/2 otherwise.
	Protocol string
	// HTTPSRecords asks each host's HTTPS record (RFC 9460) first, and
	// skips the A lookup when the record offers HTTP/3 with IPv4 hints.
	// The Resolver must be an Exchanger (DNS is). A record's ECH config
	// (ech=) is used on the host's connections, as browsers use it over
	// secure DNS, unless NoECH.
	HTTPSRecords bool
	NoECH        bool
	// HTTPSAlongside asks each host's HTTPS record beside its A records
	// and goes on once the A answer is in, as Chromium's resolver does
	// over plain DNS (it gives the HTTPS answer no extra time): the query
	// costs the resolver what it costs (a stub's upstream connection of
	// its own, when cold), and no request waits for it. The Resolver
	// must be an Exchanger; not with HTTPSRecords or Coalesce.
	HTTPSAlongside bool
	// ZeroRTT sends requests in 0-RTT on a connection resumed with a
	// ticket from an earlier load of this Loader (HTTP/3 only).
	ZeroRTT bool
	// Resolver looks up each host once per load, unless Coalesce puts the
	// lookups on the page's own connection.
	Resolver Resolver
	// Coalesce, if set, resolves over the page's HTTP/3 connection: see
	// Coalesce.
	Coalesce *Coalesce
	// WaitSettings holds every request on an HTTP/3 connection until the
	// server's SETTINGS arrive, instead of going with the remembered ones
	// (RFC 9114 §7.2.4.2) or none: the round trip the cross-layer paper
	// blamed for 0-RTT's lost gain.
	WaitSettings bool
	// Origins uses servers' ORIGIN frames (RFC 9412, docs/origin.md): an
	// origin a connection announced is fetched on it without a lookup.
	Origins bool
	// MaxLookups bounds the lookups in flight, as a browser's host
	// resolver does (ChromiumMaxLookups; the rest wait their turn, and
	// the wait is part of the lookup). 0: no bound.
	MaxLookups int
	// Tokens is how QUIC NEW_TOKEN tokens are kept for later connections:
	// TokensKeep (the default) or TokensChromium.
	Tokens string
	// AllowSpecial are special-purpose blocks (loopback, private
	// networks, ...) pages may be loaded from and reach, as a campaign's
	// allow_special opens them: a testbed's or a lab's own. Every other
	// special-purpose address is refused, the document's too unless the
	// page's URL names it, so neither a measured resolver's answer nor a
	// page's own DNS can place a load on the machine's loopback or its
	// cloud's metadata service.
	AllowSpecial []netip.Prefix
	// Port the origins listen on; default 443.
	Port     int
	RootCAs  *x509.CertPool
	Insecure bool
	// OpenSockets, if set, makes the loader's sockets (a testbed host's).
	OpenSockets func(func() error) error
	// Timeout bounds a whole load; default 30 s.
	Timeout time.Duration
	// MaxResourceBytes and MaxPageBytes bound what a load reads: a
	// response body past the first fails its resource, and the page's
	// bodies together past the second end the load with an error, so a
	// hostile or broken server cannot make the loader hold gigabytes.
	// Defaults 32 MiB and 64 MiB.
	MaxResourceBytes, MaxPageBytes int64
	// MaxRequests bounds the requests a load has in flight; the rest
	// wait their turn, as a browser's do (Chromium pools at most 256
	// sockets). Default 256, far above what the corpus's pages use at
	// once, so it shapes no real page: it keeps a hostile graph from
	// starting thousands of requests together.
	MaxRequests int
}

// ErrTooLarge is a response body, or a page's bodies, over the loader's
// bounds.
var ErrTooLarge = errors.New("over the loader's size bound")

// ChromiumMaxLookups is how many host resolutions Chromium runs at once
// (its host resolver's job limit, "6 concurrent resolver threads"); a
// page's further lookups queue behind them.
const ChromiumMaxLookups = 6

// Loader loads pages. It keeps TLS session tickets (and so resumption
// and 0-RTT) across loads; each load opens its own connections.
type Loader struct {
	cfg Config

	mu       sync.Mutex
	sessions tls.ClientSessionCache
	// tokens are QUIC NEW_TOKEN tokens (RFC 9000 §8.1.3), kept with the
	// tickets: a resumed connection that presents one has its address
	// validated at once, so the server's 0-RTT answer is not held to
	// three times what the client sent (the anti-amplification limit).
	tokens *tokenKeeper
	// By server name, from the last connection that had them: the
	// certificate lets a 0-RTT connection be reused for another origin
	// before the handshake shows it again, and the SETTINGS are what a
	// 0-RTT client must assume (RFC 9114 §7.2.4.2).
	certs    map[string]*x509.Certificate
	settings map[string]map[uint64]uint64
	altSvc   map[string]bool // origins whose Alt-Svc offered h3 (Protocol auto)
}

// New returns a loader.
func New(cfg Config) (*Loader, error) {
	switch cfg.Protocol {
	case "":
		cfg.Protocol = "h3"
	case "h3", "h2", "auto":
	default:
		return nil, fmt.Errorf("protocol %q: want h3, h2 or auto", cfg.Protocol)
	}
	if cfg.MaxResourceBytes <= 0 {
		cfg.MaxResourceBytes = 32 << 20
	}
	if cfg.MaxPageBytes <= 0 {
		cfg.MaxPageBytes = 64 << 20
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = 256
	}
	if _, ok := cfg.Resolver.(Exchanger); (cfg.HTTPSRecords || cfg.HTTPSAlongside) && cfg.Coalesce == nil && !ok {
		return nil, fmt.Errorf("HTTPS records need a DNS resolver")
	}
	if cfg.HTTPSAlongside && (cfg.HTTPSRecords || cfg.Coalesce != nil) {
		return nil, fmt.Errorf("HTTPS queries alongside A are for a resolver's plain lookups: not with HTTPS records used or coalescing")
	}
	switch cfg.Tokens {
	case "":
		cfg.Tokens = TokensKeep
	case TokensKeep, TokensChromium:
	default:
		return nil, fmt.Errorf("tokens %q: want %s or %s", cfg.Tokens, TokensKeep, TokensChromium)
	}
	if cfg.MaxLookups < 0 {
		return nil, fmt.Errorf("max lookups %d: want 0 (no bound) or more", cfg.MaxLookups)
	}
	if cfg.ZeroRTT && cfg.Protocol == "h2" {
		return nil, fmt.Errorf("0-RTT needs h3: Go's TLS over TCP sends no early data")
	}
	if err := cfg.Coalesce.check(cfg.Protocol); err != nil {
		return nil, err
	}
	if cfg.Resolver == nil && cfg.Coalesce == nil {
		return nil, fmt.Errorf("no resolver")
	}
	for _, p := range cfg.AllowSpecial {
		if !blocklist.IsSpecial(p) {
			return nil, fmt.Errorf("allow special %s: not special-purpose (RFC 6890), so never refused", p)
		}
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("port %d: want 1-65535 (0: 443)", cfg.Port)
	}
	if cfg.Port == 0 {
		cfg.Port = 443
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.OpenSockets == nil {
		cfg.OpenSockets = func(f func() error) error { return f() }
	}
	l := &Loader{cfg: cfg}
	l.Forget()
	return l, nil
}

// Forget drops every session ticket, and what was remembered with them
// (the servers' certificates and SETTINGS): the next load is a cold one.
func (l *Loader) Forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions = tls.NewLRUClientSessionCache(256)
	l.tokens = newTokenKeeper(l.cfg.Tokens)
	l.certs = map[string]*x509.Certificate{}
	l.settings = map[string]map[uint64]uint64{}
	l.altSvc = map[string]bool{}
}

// Load replays g: the document at once, then each resource once its
// parent has delivered the octets it was discovered after, and its gap
// has passed.
func (l *Loader) Load(ctx context.Context, g *Graph) *Result {
	r, _ := l.load(ctx, g, false)
	return r
}

// Document fetches a page's document alone, as a load of its own, and
// returns its body: what FromHTML reads for a page without a graph.
func (l *Loader) Document(ctx context.Context, page string) ([]byte, *Result) {
	r, body := l.load(ctx, &Graph{Page: page, Resources: []Resource{{URL: page, Type: "Document", Parent: -1}}}, true)
	return body, r
}

func (l *Loader) load(ctx context.Context, g *Graph, keepDoc bool) (*Result, []byte) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	// A negative gap of the document is the browser's lookup leading its
	// navigation: the load's clock then starts that much after the lookup.
	lead := time.Duration(max(0, -g.Resources[0].GapMs) * float64(time.Millisecond))
	ld := &load{l: l, g: g, t0: time.Now().Add(lead), keepDoc: keepDoc, abort: abort,
		res: &Result{Page: g.Page, Protocol: l.cfg.Protocol, ZeroRTT: l.cfg.ZeroRTT, OnloadGapMs: g.OnloadGapMs}}
	ld.res.Start = ld.t0
	if u, err := url.Parse(g.Resources[0].URL); err == nil {
		ld.docHost = u.Hostname()
		if a, err := netip.ParseAddr(ld.docHost); err == nil {
			ld.docLiteral = a.Unmap().WithZone("")
		}
	}
	ld.allow.Allow = l.cfg.AllowSpecial
	if l.cfg.MaxLookups > 0 {
		ld.slots = make(chan struct{}, l.cfg.MaxLookups)
	}
	ld.fetches = make(chan struct{}, l.cfg.MaxRequests)
	ld.res.Resources = make([]Fetch, len(g.Resources))
	ld.children = make([][]int, len(g.Resources))
	for i, r := range g.Resources {
		ld.res.Resources[i] = Fetch{URL: r.URL, Conn: -1}
		if i > 0 {
			ld.children[r.Parent] = append(ld.children[r.Parent], i)
		}
	}
	ld.wg.Add(len(g.Resources))
	ld.start(ctx, 0, max(0, g.Resources[0].GapMs)) // the browser's time before it asked for the document
	done := make(chan struct{})
	go func() { ld.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		<-done // every fetch ends with the context
	}
	ld.closeAll()
	res := ld.res
	res.Status = "ok"
	for _, f := range res.Resources {
		if f.Error != "" && res.Error == "" {
			res.Status, res.Error = "error", f.URL+": "+f.Error
		}
		res.NetworkMs = max(res.NetworkMs, f.End)
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrTooLarge):
		res.Status, res.Error = "error", cause.Error()
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Status, res.Error = "timeout", fmt.Sprintf("not loaded within %v", l.cfg.Timeout)
	}
	res.TTFBMs = res.Resources[0].FirstByte
	res.PLTMs = round3(res.NetworkMs + g.OnloadGapMs)
	return res, ld.doc.Bytes()
}

// load is one Load under way.
type load struct {
	l        *Loader
	g        *Graph
	t0       time.Time
	children [][]int
	wg       sync.WaitGroup
	keepDoc  bool
	doc      bytes.Buffer // the document's body, when kept
	bytes    atomic.Int64 // the bodies read so far, for MaxPageBytes
	abort    context.CancelCauseFunc

	mu         sync.Mutex
	docHost    string           // the document's host
	docLiteral netip.Addr       // its address, if the page's URL names one
	docBlock   netip.Prefix     // the special-purpose block its address is in, if any
	docPlaced  bool             // docBlock is set
	allow      blocklist.Policy // the blocks AllowSpecial opens
	res        *Result
	lookups    perKey[lookup]
	slots      chan struct{} // with MaxLookups, one per lookup in flight
	fetches    chan struct{} // one per request in flight (MaxRequests)
	conns      perKey[*originConn]
	opened     []*originConn // every connection, once, in order
}

func (ld *load) since() float64 {
	return round3(float64(time.Since(ld.t0)) / float64(time.Millisecond))
}

// start fetches resource i once gap has passed.
func (ld *load) start(ctx context.Context, i int, gap float64) {
	due := ld.since() + gap
	ld.mu.Lock()
	ld.res.Resources[i].Due = round3(due)
	ld.mu.Unlock()
	go func() {
		defer ld.wg.Done()
		if gap > 0 {
			waitUntil(ctx, ld.t0.Add(time.Duration(due*float64(time.Millisecond))))
		}
		select {
		case ld.fetches <- struct{}{}:
			defer func() { <-ld.fetches }()
		case <-ctx.Done():
		}
		ld.fetch(ctx, i)
	}()
}

// discovered starts the children of i that its first n body octets (or,
// with all, its whole body) reveal, once each. A child found after the
// whole body waits for its end, not for its last octet.
func (ld *load) discovered(ctx context.Context, i int, n int64, all bool, started []bool) {
	for k, c := range ld.children[i] {
		after := ld.g.Resources[c].AfterBytes
		if !started[k] && (all || (after <= n && after < ld.g.Resources[i].Size)) {
			started[k] = true
			ld.start(ctx, c, ld.g.Resources[c].GapMs)
		}
	}
}

func (ld *load) fetch(ctx context.Context, i int) {
	started := make([]bool, len(ld.children[i]))
	// Whatever happens to this resource, its children still count: they
	// are started (and fail or succeed on their own) when it ends.
	defer func() { ld.discovered(ctx, i, 0, true, started) }()
	fail := func(err error) {
		ld.mu.Lock()
		f := &ld.res.Resources[i]
		f.Error, f.End = printable.String(err.Error()), ld.since() // a server's close reason is its text
		ld.mu.Unlock()
	}
	u, err := url.Parse(ld.g.Resources[i].URL)
	if err != nil {
		fail(err)
		return
	}
	c, _, err := ld.conn(ctx, u.Hostname())
	if err != nil {
		fail(err)
		return
	}
	// ask sends the request on c; Sent stays the first try's.
	ask := func(c *originConn, first bool) (*http.Response, error) {
		if err := ld.settled(ctx, c); err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, c.method(), u.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("User-Agent", "doxlab-pageload")
		if p := priorityHeader(ld.g.Resources[i].Priority, ld.g.Resources[i].Type); p != "" {
			req.Header.Set("Priority", p)
		}
		ld.mu.Lock()
		if first {
			ld.res.Resources[i].Sent = ld.since()
		}
		ld.res.Resources[i].Conn = c.index
		ld.res.Conns[c.index].Requests++
		ld.mu.Unlock()
		return c.rt.RoundTrip(req)
	}
	resp, err := ask(c, true)
	if c.rejected(err) {
		if c = ld.successor(ctx, c); c.err != nil {
			err = c.err
		} else {
			resp, err = ask(c, false)
		}
	}
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	ld.mu.Lock()
	ld.res.Resources[i].FirstByte, ld.res.Resources[i].Status = ld.since(), resp.StatusCode
	ld.mu.Unlock()
	if c.qc == nil && ld.l.cfg.Protocol == "auto" && altSvcH3(resp.Header.Get("Alt-Svc")) {
		ld.l.mu.Lock()
		ld.l.altSvc[net.JoinHostPort(u.Hostname(), strconv.Itoa(ld.l.cfg.Port))] = true
		ld.l.mu.Unlock()
	}
	ld.discovered(ctx, i, 0, false, started)
	buf := make([]byte, 16<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		if n > ld.l.cfg.MaxResourceBytes {
			err = fmt.Errorf("response body %w of %d octets a resource", ErrTooLarge, ld.l.cfg.MaxResourceBytes)
		}
		if total := ld.bytes.Add(int64(k)); total > ld.l.cfg.MaxPageBytes {
			err = fmt.Errorf("page's bodies %w of %d octets a page", ErrTooLarge, ld.l.cfg.MaxPageBytes)
			ld.abort(err)
		}
		if i == 0 && ld.keepDoc {
			ld.doc.Write(buf[:k])
		}
		if k > 0 {
			ld.discovered(ctx, i, n, false, started)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			ld.mu.Lock()
			ld.res.Resources[i].Bytes = n
			ld.mu.Unlock()
			fail(err)
			return
		}
	}
	ld.mu.Lock()
	f := &ld.res.Resources[i]
	f.Bytes, f.End = n, ld.since()
	if resp.StatusCode >= 400 {
		f.Error = "HTTP status " + strconv.Itoa(resp.StatusCode)
	}
	ld.mu.Unlock()
}

// perKey runs f once per key for a load; requests that come while it
// runs wait for its result (one lookup per host, one connection per
// origin).
type perKey[T any] struct {
	mu sync.Mutex
	m  map[string]*keyed[T]
}

type keyed[T any] struct {
	done chan struct{}
	v    T
}

func (o *perKey[T]) get(ctx context.Context, key string, f func() T) (T, error) {
	o.mu.Lock()
	if o.m == nil {
		o.m = map[string]*keyed[T]{}
	}
	e, ok := o.m[key]
	if !ok {
		e = &keyed[T]{done: make(chan struct{})}
		o.m[key] = e
	}
	o.mu.Unlock()
	if !ok {
		e.v = f()
		close(e.done)
		return e.v, nil
	}
	select {
	case <-e.done:
		return e.v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// all waits for every value made, and returns them.
func (o *perKey[T]) all() []T {
	o.mu.Lock()
	es := make([]*keyed[T], 0, len(o.m))
	for _, e := range o.m {
		es = append(es, e)
	}
	o.mu.Unlock()
	var out []T
	for _, e := range es {
		<-e.done
		out = append(out, e.v)
	}
	return out
}

// lookup is one host's lookup.
type lookup struct {
	addrs []netip.Addr
	h3    bool   // its HTTPS record offered HTTP/3
	ech   []byte // its HTTPS record's ECHConfigList (RFC 9848)
	err   error
}

func (ld *load) resolve(ctx context.Context, host string) (lookup, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return lookup{addrs: []netip.Addr{a}}, nil
	}
	lo, err := ld.lookups.get(ctx, host, func() lookup {
		start := ld.since()
		if ld.slots != nil {
			select {
			case ld.slots <- struct{}{}:
				defer func() { <-ld.slots }()
			case <-ctx.Done():
				return lookup{err: ctx.Err()}
			}
		}
		resolve := ld.resolveOnConn
		if ld.l.cfg.Coalesce == nil {
			resolve = ld.l.cfg.Resolver.Resolve
			if ex, ok := ld.l.cfg.Resolver.(Exchanger); ok && ld.l.cfg.HTTPSRecords {
				resolve = func(ctx context.Context, host string) ([]netip.Addr, *Lookup, error) {
					return resolveVia(ctx, host, ex, true)
				}
			}
		}
		alongside := ld.l.cfg.HTTPSAlongside
		if alongside {
			// Nothing waits for its answer, and nothing cancels it when the
			// A answer comes: on a fast path that can be before this
			// goroutine has sent it. The load's end bounds it.
			go func() {
				q := new(dns.Msg)
				q.SetQuestion(dns.Fqdn(host), dns.TypeHTTPS)
				ld.l.cfg.Resolver.(Exchanger).Exchange(ctx, q)
			}()
		}
		addrs, rec, err := resolve(ctx, host)
		if rec == nil {
			rec = &Lookup{}
		}
		rec.HTTPSAlongside = alongside
		rec.Host, rec.StartMs, rec.EndMs = host, start, ld.since()
		if err == nil && len(addrs) == 0 {
			err = fmt.Errorf("no address for %s", host)
		}
		if err != nil {
			rec.Error = printable.String(err.Error())
		}
		for _, a := range addrs {
			rec.Addrs = append(rec.Addrs, a.String())
		}
		ld.mu.Lock()
		ld.res.Lookups = append(ld.res.Lookups, rec)
		ld.mu.Unlock()
		lo := lookup{addrs: addrs, h3: rec.HTTPS.h3(), err: err}
		if rec.HTTPS != nil {
			lo.ech = rec.HTTPS.ECH
		}
		return lo
	})
	if err != nil {
		return lookup{}, err
	}
	return lo, lo.err
}

// priorityHeader is the RFC 9218 Priority header Chromium sends for a
// request of a DevTools priority and type, so that the server schedules
// the replay's responses as it scheduled the browser's: urgency HIGHEST
// minus the request's priority (VeryHigh 0, High 1, Medium 2, Low the
// default 3, VeryLow 4), incremental for documents and images (as seen
// from Chromium 156 on the corpus pages).
func priorityHeader(priority, typ string) string {
	u, ok := map[string]int{"VeryHigh": 0, "High": 1, "Medium": 2, "Low": 3, "VeryLow": 4}[priority]
	if !ok {
		return ""
	}
	var parts []string
	if u != 3 {
		parts = append(parts, "u="+strconv.Itoa(u))
	}
	if typ == "Document" || typ == "Image" {
		parts = append(parts, "i")
	}
	return strings.Join(parts, ", ")
}

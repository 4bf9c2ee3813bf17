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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/doxlab/doxlab/transport"
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
	// The Resolver must be an Exchanger (DNS is).
	HTTPSRecords bool
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

// Result is one replayed load. Times are milliseconds from its start, on
// the monotonic clock.
type Result struct {
	Page     string    `json:"page"`
	Start    time.Time `json:"start"`
	Protocol string    `json:"protocol"` // h3 or h2
	ZeroRTT  bool      `json:"zero_rtt"` // asked for
	Status   string    `json:"status"`   // ok, error, timeout
	Error    string    `json:"error,omitempty"`
	// PLTMs is the last resource's end plus the captured onload gap:
	// comparable with the browser's loadEventEnd.
	PLTMs       float64   `json:"plt_ms"`
	NetworkMs   float64   `json:"network_ms"` // the last resource's end
	OnloadGapMs float64   `json:"onload_gap_ms"`
	TTFBMs      float64   `json:"ttfb_ms"` // the document's first byte
	Resources   []Fetch   `json:"resources"`
	Lookups     []*Lookup `json:"lookups"`
	Conns       []*Conn   `json:"conns"`
}

// Fetch is one resource's load.
type Fetch struct {
	URL       string  `json:"url"`
	Due       float64 `json:"due_ms"`        // when the graph says to ask for it
	Sent      float64 `json:"sent_ms"`       // the request handed to the connection (after DNS and the handshake as needed)
	FirstByte float64 `json:"first_byte_ms"` // response headers
	End       float64 `json:"end_ms"`
	Bytes     int64   `json:"bytes"`
	Status    int     `json:"http_status"`
	Conn      int     `json:"conn"` // index into the load's Conns
	Error     string  `json:"error,omitempty"`
}

// Lookup is one name resolved for a load.
type Lookup struct {
	Host      string `json:"host"`
	Transport string `json:"transport"` // udp, doh2, doq, ..., hosts; doh3-coalesced, dnsstream
	// Coalesced lookups went on the load's connection Conn, Early ones
	// before its handshake completed (in 0-RTT).
	Coalesced bool `json:"coalesced,omitempty"`
	Conn      int  `json:"conn,omitempty"`
	Early     bool `json:"early,omitempty"`
	// HTTPS is what the host's HTTPS record said, when it was asked.
	HTTPS *HTTPSInfo `json:"https,omitempty"`
	// HTTPSAlongside: an HTTPS query went beside the A query, its answer
	// not waited for (Config.HTTPSAlongside).
	HTTPSAlongside bool     `json:"https_alongside,omitempty"`
	StartMs        float64  `json:"start_ms"`
	EndMs          float64  `json:"end_ms"`
	Addrs          []string `json:"addrs"`
	// Record is the DNS exchange's record, for transports that make one.
	Record any    `json:"record,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Conn is one connection a load opened, and what it really did.
type Conn struct {
	Origin      string  `json:"origin"` // host:port
	Remote      string  `json:"remote"`
	Local       string  `json:"local"` // the socket's own address, as the server sees its port
	Protocol    string  `json:"protocol"`
	StartMs     float64 `json:"start_ms"`
	HandshakeMs float64 `json:"handshake_done_ms"` // when the handshake completed, from the load's start
	Resumed     bool    `json:"resumed"`
	TokenSent   bool    `json:"token_sent,omitempty"` // its first packet carried a NEW_TOKEN token
	Sent0RTT    bool    `json:"sent_0rtt"`            // requests went out before the handshake completed
	Used0RTT    bool    `json:"used_0rtt"`            // and the server accepted them
	// Rejected0RTT: the server refused the 0-RTT the handshake offered;
	// the requests were asked again on the connection that follows it.
	Rejected0RTT bool `json:"rejected_0rtt,omitempty"`
	Requests     int  `json:"requests"`
	// Origins are those the connection served, the first one it was
	// opened for; a later one was pooled onto it (same address, and the
	// certificate covers it), as browsers reuse HTTP/2 and HTTP/3
	// connections.
	Origins    []string `json:"origins"`
	DNSQueries int      `json:"dns_queries,omitempty"` // lookups coalesced onto it
	// Announced is the origin set the server's ORIGIN frames gave, and
	// OriginMs when the first arrived.
	Announced []string `json:"announced,omitempty"`
	OriginMs  float64  `json:"origin_ms,omitempty"`
	// SettingsMs is when the server's HTTP/3 SETTINGS arrived; requests
	// waited for them with WaitSettings.
	SettingsMs     float64 `json:"settings_ms,omitempty"`
	WaitedSettings bool    `json:"waited_settings,omitempty"`
	Error          string  `json:"error,omitempty"`
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

	mu      sync.Mutex
	res     *Result
	lookups perKey[lookup]
	slots   chan struct{} // with MaxLookups, one per lookup in flight
	fetches chan struct{} // one per request in flight (MaxRequests)
	conns   perKey[*originConn]
	opened  []*originConn // every connection, once, in order
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
		f.Error, f.End = err.Error(), ld.since()
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
	if err != nil && c.qc != nil && errors.Is(err, quic.Err0RTTRejected) {
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
	h3    bool // its HTTPS record offered HTTP/3
	err   error
}

func (ld *load) resolve(ctx context.Context, host string) ([]netip.Addr, bool, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, false, nil
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
			rec.Error = err.Error()
		}
		for _, a := range addrs {
			rec.Addrs = append(rec.Addrs, a.String())
		}
		ld.mu.Lock()
		ld.res.Lookups = append(ld.res.Lookups, rec)
		ld.mu.Unlock()
		return lookup{addrs, rec.HTTPS.h3(), err}
	})
	if err != nil {
		return nil, false, err
	}
	return lo.addrs, lo.h3, lo.err
}

// originConn is one connection, shared by its origins' requests.
type originConn struct {
	rt     http.RoundTripper
	qc     *quic.Conn          // HTTP/3 only
	cc     *http3.ClientConn   // HTTP/3 only
	name   string              // the server name its certificate was checked for
	certs  []*x509.Certificate // HTTP/2's, from its handshake
	remote netip.AddrPort
	nmu    sync.Mutex
	next   *originConn // what replaced it after the server rejected its 0-RTT (successor)
	index  int         // in the load's Conns; -1 before one was begun
	early  bool        // 0-RTT: requests may go before the handshake completes
	// The origin set the server announced (ORIGIN frames), and a channel
	// closed at the first frame.
	omu       sync.Mutex
	announced map[string]bool
	originCh  chan struct{}
	// The server's SETTINGS, set before settingsCh is closed (HTTP/3).
	settings   map[uint64]uint64
	settingsCh chan struct{}
	close      func()
	closed     sync.Once
	err        error
}

// method is GET, or the GET that quic-go's HTTP/3 sends before the
// handshake completes.
func (c *originConn) method() string {
	if c.early {
		return http3.MethodGet0RTT
	}
	return http.MethodGet
}

// conn returns the origin's connection, opening it (after resolving its
// host) for the first request: one connection per origin, as browsers
// keep for HTTP/2 and HTTP/3.
func (ld *load) conn(ctx context.Context, host string) (*originConn, int, error) {
	origin := net.JoinHostPort(host, strconv.Itoa(ld.l.cfg.Port))
	c, err := ld.conns.get(ctx, origin, func() *originConn { return ld.dial(ctx, host, origin) })
	if err != nil {
		return nil, -1, err
	}
	c = c.current()
	return c, c.index, c.err
}

// successor is the connection that replaces c once the server rejected
// the 0-RTT requests c sent, dialled by the first request to learn it.
// A browser's QUIC stack sends such requests again once the handshake
// completes, on the same connection; quic-go's HTTP/3 cannot go on over
// it (quic-go#3259), so the loader asks again on a connection without
// 0-RTT, which costs a handshake more, and c's record says rejected.
func (ld *load) successor(ctx context.Context, c *originConn) *originConn {
	c.nmu.Lock()
	defer c.nmu.Unlock()
	if c.next == nil {
		ld.mu.Lock()
		info := ld.res.Conns[c.index]
		info.Rejected0RTT = true
		origin := info.Origin
		ld.mu.Unlock()
		c.next = ld.open(ctx, c.name, origin, c.remote, "h3", false)
	}
	return c.next
}

// current is c, or what replaced it after a rejected 0-RTT.
func (c *originConn) current() *originConn {
	for {
		c.nmu.Lock()
		n := c.next
		c.nmu.Unlock()
		if n == nil {
			return c
		}
		c = n
	}
}

// dial resolves host, and pools the origin onto a connection already
// open to that address whose certificate covers host, or opens one.
func (ld *load) dial(ctx context.Context, host, origin string) *originConn {
	if c := ld.byOrigin(ctx, host, origin); c != nil {
		return c
	}
	addrs, h3, err := ld.resolve(ctx, host)
	if err != nil {
		return &originConn{index: -1, err: err}
	}
	remote := netip.AddrPortFrom(addrs[0], uint16(ld.l.cfg.Port))
	if c := ld.pool(ctx, host, origin, remote); c != nil {
		return c
	}
	proto := ld.l.cfg.Protocol
	if proto == "auto" {
		ld.l.mu.Lock()
		h3 = h3 || ld.l.altSvc[origin]
		ld.l.mu.Unlock()
		proto = map[bool]string{true: "h3", false: "h2"}[h3]
	}
	return ld.open(ctx, host, origin, remote, proto, ld.l.cfg.ZeroRTT)
}

// open opens a connection to remote for origin, its certificate checked
// for name; over HTTP/3 in 0-RTT if early and the session allows.
func (ld *load) open(ctx context.Context, name, origin string, remote netip.AddrPort, proto string, early bool) *originConn {
	c := &originConn{index: -1, name: name, remote: remote}
	info := &Conn{Origin: origin, Origins: []string{origin}, Protocol: proto, StartMs: ld.since(), Remote: remote.String()}
	ld.mu.Lock()
	c.index = len(ld.res.Conns)
	ld.res.Conns = append(ld.res.Conns, info)
	ld.mu.Unlock()
	ld.l.mu.Lock()
	sessions := ld.l.sessions
	ld.l.mu.Unlock()
	tlsConf := &tls.Config{ServerName: name, RootCAs: ld.l.cfg.RootCAs, InsecureSkipVerify: ld.l.cfg.Insecure, ClientSessionCache: sessions,
		KeyLogWriter: transport.KeyLog(nil)}
	if proto == "h3" {
		c.err = ld.dialH3(ctx, c, info, remote, tlsConf, early)
	} else {
		c.err = ld.dialH2(ctx, c, info, remote, tlsConf)
	}
	if c.err != nil {
		info.Error = c.err.Error()
	}
	ld.mu.Lock()
	ld.opened = append(ld.opened, c)
	ld.mu.Unlock()
	return c
}

// pool returns a connection open to remote whose certificate covers
// host (RFC 9114 §3.3, RFC 9113 §9.1.1), recording origin on it.
func (ld *load) pool(ctx context.Context, host, origin string, remote netip.AddrPort) *originConn {
	ld.mu.Lock()
	open := slices.Clone(ld.opened)
	ld.mu.Unlock()
	for _, c := range open {
		if c.err == nil && c.remote == remote && c.current() == c && ld.serves(ctx, c, host, origin) {
			return c
		}
	}
	return nil
}

// serves says whether c's certificate covers host, and if so records
// origin as one c serves.
func (ld *load) serves(ctx context.Context, c *originConn, host, origin string) bool {
	cert, err := ld.cert(ctx, c)
	if err != nil || cert.VerifyHostname(host) != nil {
		return false
	}
	ld.mu.Lock()
	if info := ld.res.Conns[c.index]; !slices.Contains(info.Origins, origin) {
		info.Origins = append(info.Origins, origin)
	}
	ld.mu.Unlock()
	return true
}

// cert is the certificate c's server showed: from the handshake, or,
// while a 0-RTT handshake is under way, the one remembered with the
// ticket.
func (ld *load) cert(ctx context.Context, c *originConn) (*x509.Certificate, error) {
	if c.qc != nil && !handshakeDone(c.qc) {
		ld.l.mu.Lock()
		cert := ld.l.certs[c.name]
		ld.l.mu.Unlock()
		if cert != nil {
			return cert, nil
		}
		select {
		case <-c.qc.HandshakeComplete():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	certs := c.certs
	if c.qc != nil {
		certs = c.qc.ConnectionState().TLS.PeerCertificates
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate from %s", c.remote)
	}
	return certs[0], nil
}

// settled waits, if the loader is told to, for the server's SETTINGS
// before c's first request.
func (ld *load) settled(ctx context.Context, c *originConn) error {
	if !ld.l.cfg.WaitSettings || c.cc == nil {
		return nil
	}
	if err := c.awaitSettings(ctx); err != nil {
		return err
	}
	ld.mu.Lock()
	ld.res.Conns[c.index].WaitedSettings = true
	ld.mu.Unlock()
	return nil
}

// awaitSettings waits for the server's SETTINGS on c.
func (c *originConn) awaitSettings(ctx context.Context) error {
	select {
	case <-c.settingsCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.qc.Context().Done():
		return fmt.Errorf("connection closed before the server's SETTINGS: %w", context.Cause(c.qc.Context()))
	}
}

func handshakeDone(qc *quic.Conn) bool {
	select {
	case <-qc.HandshakeComplete():
		return true
	default:
		return false
	}
}

func (ld *load) dialH3(ctx context.Context, c *originConn, info *Conn, remote netip.AddrPort, tlsConf *tls.Config, early bool) error {
	tlsConf.NextProtos = []string{http3.NextProtoH3}
	var udp *net.UDPConn
	err := ld.l.cfg.OpenSockets(func() (err error) {
		udp, err = net.ListenUDP("udp", nil)
		return err
	})
	if err != nil {
		return err
	}
	info.Local = udp.LocalAddr().String()
	tr := &quic.Transport{Conn: udp}
	ld.l.mu.Lock()
	tokens := ld.l.tokens.forConn(tlsConf.ClientSessionCache)
	ld.l.mu.Unlock()
	tlsConf.ClientSessionCache = tokens.Tickets()
	qconf := &quic.Config{HandshakeIdleTimeout: ld.l.cfg.Timeout, MaxIdleTimeout: 30 * time.Second, TokenStore: tokens,
		MaxIncomingStreams: -1} // an HTTP/3 server opens no bidirectional streams
	dial := tr.Dial
	if early {
		dial = tr.DialEarly
	}
	qc, err := dial(ctx, net.UDPAddrFromAddrPort(remote), tlsConf, qconf)
	if err != nil {
		tr.Close()
		udp.Close()
		return fmt.Errorf("QUIC handshake with %s: %w", remote, err)
	}
	c.qc = qc
	info.TokenSent = tokens.Presented()
	handshake := func() {
		ld.mu.Lock()
		info.HandshakeMs = ld.since()
		ld.mu.Unlock()
		if certs := qc.ConnectionState().TLS.PeerCertificates; len(certs) > 0 {
			ld.l.mu.Lock()
			ld.l.certs[tlsConf.ServerName] = certs[0]
			ld.l.mu.Unlock()
		}
	}
	if handshakeDone(qc) {
		handshake()
	} else {
		c.early, info.Sent0RTT = true, true
		go func() {
			select {
			case <-qc.HandshakeComplete():
				handshake()
			case <-qc.Context().Done():
			}
		}()
	}
	h3 := &http3.Transport{}
	rc := h3.NewRawClientConn(qc)
	c.cc, c.rt = rc.ClientConn, rc.ClientConn
	c.originCh, c.settingsCh = make(chan struct{}), make(chan struct{})
	go ld.serverStreams(qc, rc, c, info, func(settings map[uint64]uint64) {
		tokens.Settled()
		ld.mu.Lock()
		info.SettingsMs = ld.since()
		ld.mu.Unlock()
		ld.l.mu.Lock()
		ld.l.settings[tlsConf.ServerName] = settings
		ld.l.mu.Unlock()
	})
	c.close = func() {
		st := qc.ConnectionState()
		ld.mu.Lock()
		info.Resumed, info.Used0RTT = st.TLS.DidResume, st.Used0RTT
		ld.mu.Unlock()
		qc.CloseWithError(0, "")
		tr.Close()
		udp.Close()
	}
	return nil
}

func (ld *load) dialH2(ctx context.Context, c *originConn, info *Conn, remote netip.AddrPort, tlsConf *tls.Config) error {
	tlsConf.NextProtos = []string{"h2"}
	var raw net.Conn
	err := ld.l.cfg.OpenSockets(func() (err error) {
		raw, err = (&net.Dialer{}).DialContext(ctx, "tcp", remote.String())
		return err
	})
	if err != nil {
		return err
	}
	info.Local = raw.LocalAddr().String()
	tc := tls.Client(raw, tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return fmt.Errorf("TLS handshake with %s: %w", remote, err)
	}
	info.HandshakeMs = ld.since()
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		return fmt.Errorf("%s negotiated %q, not h2", remote, p)
	}
	// The standard library speaks HTTP/2 over the connection made here
	// (in the right namespace, its handshake timed).
	var protos http.Protocols
	protos.SetHTTP2(true)
	h2 := &http.Transport{Protocols: &protos, DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return tc, nil }}
	cc, err := h2.NewClientConn(ctx, "https", remote.String())
	if err != nil {
		tc.Close()
		return err
	}
	info.Resumed = tc.ConnectionState().DidResume
	c.certs = tc.ConnectionState().PeerCertificates
	c.rt = cc
	c.close = func() { cc.Close() }
	return nil
}

// closeAll closes the load's connections, reading their final facts.
func (ld *load) closeAll() {
	for _, c := range ld.conns.all() { // waits for every dial under way
		if c.close != nil {
			c.closed.Do(c.close) // a pooled connection serves several origins
		}
	}
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

// altSvcH3 says whether an Alt-Svc header (RFC 7838) offers HTTP/3 on
// the same host: h3=":PORT". An alternative on another host is not
// followed (the loader fetches each origin where it resolves).
func altSvcH3(v string) bool {
	for _, alt := range strings.Split(v, ",") {
		proto, rest, ok := strings.Cut(strings.TrimSpace(alt), "=")
		if ok && proto == "h3" && strings.HasPrefix(strings.Trim(strings.SplitN(rest, ";", 2)[0], " \""), ":") {
			return true
		}
	}
	return false
}

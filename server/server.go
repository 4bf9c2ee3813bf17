// Package server is doxlab's DNS and web server: one process serving Do53
// over UDP and TCP, DoT, DoH over HTTP/1.1, /2 and /3, DoQ, and web pages
// over HTTP/3 and HTTP/2, all with one TLS identity and one set of session
// ticket and QUIC token keys, so tickets and tokens from one listener work
// on another. Every transport hands queries to one handler, which applies
// the configured faults and writes a record per query.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/odoh"
	"github.com/doxlab/doxlab/protocol"
	"github.com/miekg/dns"
)

// Server runs the listeners of one Config.
type Server struct {
	cfg      *Config
	id       *identity
	ans      *answerer
	ech      *ech.Keys     // the web listener's ECH keys, with web.ech
	odoh     *odoh.KeyPair // the ODoH target's key, with odoh.target
	proxy    *odohProxy    // with odoh.proxy
	faults   *faults
	rec      *recorder
	metrics  *metrics
	refusals *refusals
	pending  pendingConns // QUIC connections whose conn record is not written yet
	workers  *workers     // goroutines for per-stream work

	mu      sync.Mutex
	addrs   map[string]net.Addr
	closers []io.Closer
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

// New prepares a server; Start binds its listeners.
func New(cfg *Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := cfg.Listen
	id, err := loadIdentity(&cfg.TLS, []string{l.DoT, l.DoH, l.DoH3, l.DoQ, l.Web, cfg.Web.ECH.PublicName})
	if err != nil {
		return nil, err
	}
	ans, err := newAnswerer(&cfg.Answers)
	if err != nil {
		return nil, err
	}
	keys, err := loadECH(&cfg.Web.ECH)
	if err != nil {
		return nil, fmt.Errorf("web.ech: %w", err)
	}
	if keys != nil {
		ans.ech = keys.ConfigList
	}
	kp, proxy, err := loadODoH(&cfg.ODoH)
	if err != nil {
		return nil, err
	}
	if kp != nil {
		ans.odoh = odoh.MarshalConfigs(kp.Config)
	}
	rec, err := newRecorder(cfg.Records)
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	s := &Server{cfg: cfg, id: id, ans: ans, ech: keys, odoh: kp, proxy: proxy, faults: newFaults(cfg.Faults), rec: rec, refusals: newRefusals(), addrs: map[string]net.Addr{}}
	if cfg.TLS.KeyLog != "" {
		f, err := os.OpenFile(cfg.TLS.KeyLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			rec.close()
			return nil, fmt.Errorf("tls.key_log: %w", err)
		}
		id.keyLog = f
		s.closers = append(s.closers, f)
	}
	if proxy != nil {
		s.closers = append(s.closers, proxy) // its connections to targets
	}
	if ans.fwd != nil {
		// Its connections to the upstream, closed last (closers close in
		// reverse): a stub a page task starts, closed, would otherwise
		// keep its upstream connection, and the upstream its end of it.
		s.closers = append([]io.Closer{ans}, s.closers...)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.workers = newWorkers(s.ctx.Done())
	return s, nil
}

// StartIn prepares and starts a server whose listening sockets open
// inside open's call: the testbed's Run puts them into a host, as
// transport.Options.OpenSockets does for clients.
func StartIn(cfg *Config, open func(func() error) error) (*Server, error) {
	srv, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := open(srv.Start); err != nil {
		return nil, err
	}
	return srv, nil
}

// Start binds every configured listener and serves in the background. If
// one cannot bind, the others are closed and the error names it.
func (s *Server) Start() error {
	l := s.cfg.Listen
	steps := []struct {
		name, addr string
		start      func(string) error
	}{
		{"udp", l.UDP, s.serveUDP},
		{"tcp", l.TCP, func(a string) error { return s.serveStream("tcp", a, false) }},
		{"dot", l.DoT, func(a string) error { return s.serveStream("dot", a, true) }},
		{"doh", l.DoH, s.serveDoH},
		{"doh3", l.DoH3, s.serveDoH3},
		{"doq", l.DoQ, s.serveDoQ},
		{"web", l.Web, s.serveWeb},
		{"metrics", s.cfg.Metrics, s.serveMetrics},
	}
	if s.cfg.Metrics != "" {
		s.metrics = newMetrics()
	}
	s.rotateECH()
	for _, st := range steps {
		if st.addr == "" {
			continue
		}
		if err := st.start(st.addr); err != nil {
			s.Close()
			return fmt.Errorf("listen.%s %s: %w", st.name, st.addr, err)
		}
	}
	return nil
}

// URL is the URL that reaches p on this server, "" when no listener
// speaks it.
func (s *Server) URL(p protocol.Protocol) string {
	a := s.Addr(p.Listener())
	if a == nil {
		return ""
	}
	return p.URL(a.String(), s.cfg.DoHPath)
}

// ListenerNames are the listeners' names, as Addr and records take them.
var ListenerNames = []string{"udp", "tcp", "dot", "doh", "doh3", "doq", "web", "metrics"}

// Ready is what a started server tells a process that waits for it:
// every bound listener and the certificate's SPKI hash. 'doxlab serve
// --ready FILE' writes it as JSON once every listener is bound.
type Ready struct {
	Listeners map[string]string `json:"listeners"` // name -> bound address
	SPKI      string            `json:"spki"`      // base64 SHA-256 of the public key (Chromium's form)
}

// Ready describes the started server.
func (s *Server) Ready() Ready {
	r := Ready{Listeners: map[string]string{}, SPKI: s.SPKI()}
	for _, name := range ListenerNames {
		if a := s.Addr(name); a != nil {
			r.Listeners[name] = a.String()
		}
	}
	return r
}

// Addr is the bound address of a listener ("udp", "tcp", "dot", "doh",
// "doh3", "doq", "web", "metrics"), or nil.
func (s *Server) Addr(name string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[name]
}

// CertPEM is the certificate all listeners present.
func (s *Server) CertPEM() []byte { return s.id.certPEM }

// Config is the configuration the server runs with, defaults filled in.
func (s *Server) Config() *Config { return s.cfg }

// SPKI is the base64 SHA-256 of the certificate's public key, the form
// Chromium's --ignore-certificate-errors-spki-list takes.
func (s *Server) SPKI() string { return s.id.spki }

// OnRecord sets a function that sees every record (tests use it).
func (s *Server) OnRecord(f func(*Record)) {
	s.rec.mu.Lock()
	s.rec.hook = f
	s.rec.on.Store(f != nil || s.rec.enc != nil)
	s.rec.mu.Unlock()
}

// recording says whether records go anywhere: a file, a hook, metrics.
func (s *Server) recording() bool { return s.metrics != nil || s.rec.on.Load() }

func (s *Server) track(name string, a net.Addr, c io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a != nil {
		s.addrs[name] = a
	}
	s.closers = append(s.closers, c)
}

func (s *Server) goServe(f func()) {
	s.wg.Add(1)
	go func() { defer s.wg.Done(); f() }()
}

// Close stops every listener and waits for the serving loops.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	cs := s.closers
	s.closers = nil
	s.mu.Unlock()
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		if err := cs[i].Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second): // in-flight delayed answers are abandoned
	}
	s.rec.close()
	return errors.Join(errs...)
}

// handle answers one query for any transport: it applies the faults, asks
// the answerer and writes the record. A nil answer means drop.
func (s *Server) handle(ctx context.Context, q *dns.Msg, rec *Record, received time.Time) *dns.Msg {
	rec.Kind = "query"
	if len(q.Question) > 0 {
		rec.QName, rec.QType = q.Question[0].Name, dns.TypeToString[q.Question[0].Qtype]
	}
	delay, drop := s.faults.decide(rec.QName)
	if drop {
		rec.Dropped = true
		s.record(rec)
		return nil
	}
	if rec.Transport != "udp" {
		ctx = context.WithValue(ctx, streamClient{}, true)
	}
	r, up, why := s.ans.answer(ctx, q)
	rec.Upstream = up
	if why != "" {
		rec.Reason = string(why) // the query's own record says why it was refused too
		s.refuse(rec.Listener, rec.Transport, nil, why, "from "+rec.Remote)
	}
	if delay > 0 {
		rec.DelayMs = ms(delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			rec.Error = "canceled during injected delay"
			s.record(rec)
			return nil
		}
	}
	// Names compressed (RFC 1035 §4.1.4), as every resolver sends them:
	// an uncompressed answer overstates octets, packets and padding.
	r.Compress = true
	padResponse(q, r, rec.Transport != "udp" && rec.Transport != "tcp")
	rec.Rcode = dns.RcodeToString[r.Rcode]
	rec.ServerMs = ms(time.Since(received))
	s.record(rec)
	return r
}

func (s *Server) record(rec *Record) {
	s.rec.write(rec) // returns at once when no file or hook takes it
	if s.metrics != nil {
		s.metrics.observe(rec)
	}
}

// keepaliveOption says whether q carries the edns-tcp-keepalive option.
func keepaliveOption(q *dns.Msg) bool {
	if o := q.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if opt.Option() == dns.EDNS0TCPKEEPALIVE {
				return true
			}
		}
	}
	return false
}

// padResponse pads the answer to a 468-octet block when the query was
// padded over an encrypted transport (RFC 8467 §4.1), and keeps the
// EDNS(0) OPT record in the answer when the query had one.
func padResponse(q, r *dns.Msg, encrypted bool) {
	qopt := q.IsEdns0()
	if qopt == nil {
		return
	}
	if r.IsEdns0() == nil {
		r.SetEdns0(maxUDPSize, qopt.Do())
	}
	if !encrypted {
		return
	}
	padded := false
	for _, o := range qopt.Option {
		padded = padded || o.Option() == dns.EDNS0PADDING
	}
	if !padded {
		return
	}
	ropt := r.IsEdns0()
	p := &dns.EDNS0_PADDING{}
	ropt.Option = append(ropt.Option, p)
	if rem := r.Len() % 468; rem != 0 {
		p.Padding = make([]byte, 468-rem)
	}
}

// tlsFacts copies a TLS connection's facts into a record.
func tlsFacts(rec *Record, cs tls.ConnectionState) {
	rec.ALPN, rec.Resumed, rec.SNI = cs.NegotiatedProtocol, cs.DidResume, cs.ServerName
	switch cs.Version {
	case tls.VersionTLS13:
		rec.TLSVersion = "1.3"
	case tls.VersionTLS12:
		rec.TLSVersion = "1.2"
	default:
		rec.TLSVersion = fmt.Sprintf("0x%04x", cs.Version)
	}
}

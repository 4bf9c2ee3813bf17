package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/h3ext"
	"github.com/doxlab/doxlab/internal/h3server"
	"github.com/doxlab/doxlab/internal/odoh"
)

type quicConnKey struct{}

// dohHandler answers RFC 8484 GET and POST and the JSON API on any HTTP
// version; the record says which version really carried it.
func (s *Server) dohHandler(listener string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		received := time.Now()
		rec := httpRecord(listener, r)
		q, asJSON, err := dnswire.ParseDoHRequest(r)
		if reason, he := s.dohRefusal(q, asJSON, err); he != nil {
			rec.Kind, rec.Error = "query", he.Error()
			s.record(rec)
			s.refuse(listener, rec.Transport, remoteAddr(r), reason, fmt.Sprintf("%d %s", he.Code, he.Msg))
			http.Error(w, he.Msg, he.Code)
			return
		}
		id := q.Id // the answerer may change it when it forwards
		resp := s.handle(r.Context(), q, rec, received)
		if resp == nil {
			<-r.Context().Done() // dropped: the client times out
			return
		}
		ctype, maxAge, body, err := dohAnswer(id, resp, asJSON)
		if err != nil {
			http.Error(w, "packing answer", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "max-age="+strconv.Itoa(maxAge))
		w.Header().Set("Content-Type", ctype)
		w.Write(body)
	}
}

// httpRecord is the record of a request's query: listener, addresses,
// transport by HTTP version (doh1, doh2, doh3) and connection facts.
func httpRecord(listener string, r *http.Request) *Record {
	rec := &Record{Listener: listener, Remote: r.RemoteAddr}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		rec.Local = la.String()
	}
	switch r.ProtoMajor {
	case 3:
		rec.Transport = "doh3"
	case 2:
		rec.Transport = "doh2"
	default:
		rec.Transport = "doh1"
	}
	if c, ok := r.Context().Value(quicConnKey{}).(*quic.Conn); ok {
		quicFacts(rec, c)
		rec.Local = c.LocalAddr().String()
	} else if r.TLS != nil {
		tlsFacts(rec, *r.TLS)
	}
	return rec
}

// dohRefusal is why a parsed DoH request gets no answer, on any HTTP
// version, and its status; nil when it is answered.
func (s *Server) dohRefusal(q *dns.Msg, asJSON bool, err error) (Reason, *dnswire.HTTPError) {
	switch {
	case err == nil && !asJSON && s.cfg.DoHJSONOnly:
		reason := ReasonBadRequest
		if q.Response {
			reason = ReasonResponse
		}
		return reason, &dnswire.HTTPError{Code: http.StatusUnsupportedMediaType, Msg: "only application/dns-json here"}
	case err == nil && q.Response:
		// Never answer an answer (see serveUDP).
		return ReasonResponse, &dnswire.HTTPError{Code: http.StatusBadRequest, Msg: "not a query: QR=1"}
	case err != nil:
		var he *dnswire.HTTPError
		if !errors.As(err, &he) {
			he = &dnswire.HTTPError{Code: http.StatusBadRequest, Msg: err.Error()}
		}
		return ReasonBadRequest, he
	}
	return "", nil
}

// dohAnswer is a DoH response's content type, max-age (the answer's
// smallest TTL, RFC 8484 §5.1) and body, with the query's ID.
func dohAnswer(id uint16, resp *dns.Msg, asJSON bool) (ctype string, maxAge int, body []byte, err error) {
	resp.Id = id
	maxAge = int(minTTL(resp))
	if asJSON {
		return dnswire.MimeJSON, maxAge, dnswire.EncodeJSON(resp), nil
	}
	body, err = resp.Pack()
	return dnswire.MimeDNS, maxAge, body, err
}

// remoteAddr is a request's client address, for refusals.
func remoteAddr(r *http.Request) net.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return nil
}

func minTTL(m *dns.Msg) uint32 {
	ttl := uint32(300)
	for _, rr := range append(append([]dns.RR{}, m.Answer...), m.Ns...) {
		ttl = min(ttl, rr.Header().Ttl)
	}
	return ttl
}

// serveHTTPS serves h over TLS on TCP with HTTP/2 and HTTP/1.1. Go's
// server reads a pipelined HTTP/1.1 request only after answering the one
// before, so DoH/1.1 pipelining is answered strictly in order.
//
// web says the listener serves pages: its conn records are labelled h1 or
// h2 (HTTP, whatever the requests were), a DoH listener's doh1 or doh2.
// serveHTTPS serves h over HTTP/1.1 and HTTP/2 with TLS. On a web
// listener, origins, if any, are announced in an HTTP/2 ORIGIN frame
// (RFC 8336) after the server's SETTINGS on every HTTP/2 connection.
func (s *Server) serveHTTPS(name, addr string, h http.Handler, web bool, origins []string) error {
	var h2Origin []byte
	if len(origins) > 0 {
		var err error
		if h2Origin, err = h3ext.H2Origin(origins); err != nil {
			return err
		}
	}
	ln, err := s.listenTCP(addr)
	if err != nil {
		return err
	}
	lim := s.cfg.Limits
	var outer *echOuter
	tlsConf := s.tcpTLS("h2", "http/1.1")
	if web && s.ech != nil {
		outer = &echOuter{}
		tlsConf = s.withECH(tlsConf, outer)
	}
	srv := &http.Server{
		Handler: stallHandler(h),
		// The request's connection, for its slot (stallHandler).
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc := stallOf(c); sc != nil {
				return context.WithValue(ctx, stallKey{}, sc)
			}
			return ctx
		},
		TLSConfig:   tlsConf,
		IdleTimeout: lim.IdleTimeout,
		// The TLS handshake, a request's headers and its body each have
		// handshake_timeout: a POST that never sends its body, or
		// announces more than it sends, is answered 400 then.
		ReadHeaderTimeout: lim.HandshakeTimeout,
		ReadTimeout:       lim.HandshakeTimeout,
		MaxHeaderBytes:    16 << 10,
		Protocols:         new(http.Protocols),
		ConnState:         s.connState(name),
		ErrorLog:          quietLog(),
	}
	srv.Protocols.SetHTTP1(true)
	// HTTP/2 through x/net's server on a recordConn (see serveH2); with
	// TLSNextProto set, net/http leaves its bundled HTTP/2 off.
	// A DoH listener answers HTTP/2 itself (see doh2Conn).
	h2 := &http2.Server{IdleTimeout: lim.IdleTimeout} //nolint:staticcheck // see serveH2
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		http2.NextProtoTLS: func(hs *http.Server, tc *tls.Conn, h http.Handler) {
			if web {
				serveH2(h2, hs, tc, h, h2Origin, outer.get(tc.NetConn()))
			} else {
				s.serveDoH2(name, hs, tc)
			}
		},
	}
	s.track(name, ln.Addr(), srv)
	s.goServe(func() { srv.Serve(tlsListener{ln, srv.TLSConfig, s, name, web, origins, outer}) })
	return nil
}

// tlsListener hands net/http TLS connections and writes a conn record for
// each once its handshake ends.
type tlsListener struct {
	net.Listener
	conf *tls.Config
	s    *Server
	name string
	web  bool
	// origins are announced in an ORIGIN frame on each HTTP/2
	// connection; its conn record lists them.
	origins []string
	outer   *echOuter // the outer names of ECH handshakes, with web.ech
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c = newStallConn(c) // its slot is set once net/http admits it
	if !l.web {
		c = &batchConn{Conn: c} // for doh2Conn
	}
	tc := tls.Server(c, l.conf)
	if l.s.rec != nil {
		pc := l.s.pending.add(tc, nil)
		go func() {
			defer l.s.pending.remove(tc, pc)
			l.record(tc, c, time.Now())
		}()
	}
	return tc, nil
}

// record waits for the handshake net/http runs (a second Handshake call
// waits for the first and returns its result; net/http's deadline
// bounds both) and writes the connection's record.
func (l tlsListener) record(tc *tls.Conn, c net.Conn, start time.Time) {
	err := tc.Handshake()
	handshake := ms(time.Since(start))
	e := l.outer.get(c)
	if e != nil {
		// HTTP/2 tells GREASE from a rejection at its first read (recordConn).
		if err == nil && !tc.ConnectionState().ECHAccepted && tc.ConnectionState().NegotiatedProtocol == "h2" {
			e.wait(nil, nil)
		}
		l.outer.m.Delete(c)
		if err != nil {
			e.settle(isECHRequired(err))
		}
	}
	if lag := recordLag.Load(); lag > 0 { // tests of Settle
		time.Sleep(time.Duration(lag))
	}
	rec := &Record{Kind: "conn", Listener: l.name, Remote: tc.RemoteAddr().String(), Local: tc.LocalAddr().String(), HandshakeMs: handshake, Began: start}
	cs := tc.ConnectionState()
	tlsFacts(rec, cs)
	rec.Transport = httpLabel(l.web, cs.NegotiatedProtocol)
	if cs.NegotiatedProtocol == "h2" {
		rec.Origins = l.origins
	}
	if err != nil {
		rec.Error = err.Error()
	}
	echFacts(rec, e, cs.ECHAccepted)
	if err == nil && rec.ECH == ech.Rejected {
		rec.Error = "the client aborted: encrypted client hello required"
	}
	l.s.record(rec)
}

// httpLabel is a TCP HTTPS connection's transport label by its ALPN.
func httpLabel(web bool, alpn string) string {
	switch {
	case web && alpn == "h2":
		return "h2"
	case web:
		return "h1"
	case alpn == "h2":
		return "doh2"
	}
	return "doh1"
}

// connState follows net/http's connections: a pool admits them
// (limitConns), and one that carries a request has its handshake done
// (Settle).
func (s *Server) connState(listener string) func(net.Conn, http.ConnState) {
	limit := s.limitConns(listener)
	return func(c net.Conn, st http.ConnState) {
		if rc, ok := c.(*recordConn); ok {
			c = rc.tlsConn() // HTTP/2's hooks see the wrapper
		}
		if st == http.StateActive {
			s.pending.activate(c)
		}
		limit(c, st)
	}
}

// limitConns admits net/http's connections through a pool (see pool):
// only an admitted connection frees a slot when it closes, and one with
// no request in flight (StateIdle, or new) may be closed to make room.
func (s *Server) limitConns(listener string) func(net.Conn, http.ConnState) {
	lim := s.cfg.Limits
	conns := newPool(lim.MaxConns, lim.MaxConnsPerSource, lim.StallTimeout)
	type state struct {
		sl     *slot
		active bool
	}
	var mu sync.Mutex
	admitted := map[net.Conn]*state{}
	return func(c net.Conn, st http.ConnState) { // c unwrapped by connState
		mu.Lock()
		cs := admitted[c]
		mu.Unlock()
		switch st {
		case http.StateNew:
			sl := s.admit(conns, listener, "doh", c.RemoteAddr(), func() { c.Close() })
			if sl == nil {
				c.Close()
				return
			}
			if sc := stallOf(c); sc != nil {
				sc.sl.Store(sl)
			}
			mu.Lock()
			admitted[c] = &state{sl: sl}
			mu.Unlock()
		case http.StateActive:
			if cs != nil && !cs.active {
				cs.active = true
				cs.sl.begin()
			}
		case http.StateIdle:
			if cs != nil && cs.active {
				cs.active = false
				cs.sl.end()
			}
		case http.StateClosed, http.StateHijacked:
			if tc, ok := c.(*tls.Conn); ok && cs != nil && !tc.ConnectionState().HandshakeComplete {
				// net/http ran the handshake and only logs its failure.
				s.refuse(listener, "doh", c.RemoteAddr(), ReasonHandshake, "TLS handshake not completed (failed or timed out)")
			}
			if cs != nil {
				cs.sl.release()
				mu.Lock()
				delete(admitted, c)
				mu.Unlock()
			}
		}
	}
}

func (s *Server) dohMux(listener string) *http.ServeMux {
	mux := http.NewServeMux()
	s.handleDoH(mux, listener)
	return mux
}

// handleDoH puts the DoH endpoint on mux, with Oblivious DoH's target,
// proxy and configs when configured (odoh.go).
func (s *Server) handleDoH(mux *http.ServeMux, listener string) {
	mux.Handle(s.cfg.DoHPath, s.oblivious(listener, s.dohHandler(listener)))
	if s.odoh != nil {
		mux.HandleFunc(odoh.ConfigsPath, s.odohConfigs)
	}
}

// serveDoH answers DoH over HTTP/1.1 and HTTP/2, announcing its DoH/3
// twin, when there is one, with Alt-Svc (RFC 7838): a client that speaks
// HTTP/3 moves there, as from the web listener.
func (s *Server) serveDoH(addr string) error {
	mux := s.dohMux("doh")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if alt := s.dohAltSvc(); alt != "" {
			w.Header().Set("Alt-Svc", alt)
		}
		mux.ServeHTTP(w, r)
	})
	return s.serveHTTPS("doh", addr, h, false, nil)
}

// dohAltSvc is the Alt-Svc value that names the DoH/3 listener, "" when
// none is bound: ":PORT" when it shares the DoH listener's address (the
// same name, so the same certificate), else "IP:PORT".
func (s *Server) dohAltSvc() string {
	h3, ok := s.Addr("doh3").(*net.UDPAddr)
	if !ok {
		return ""
	}
	host := ""
	if h2, ok := s.Addr("doh").(*net.TCPAddr); !ok || !h2.IP.Equal(h3.IP) {
		host = h3.IP.String()
		if h3.IP.To4() == nil {
			host = "[" + host + "]"
		}
	}
	return fmt.Sprintf(`h3="%s:%d"; ma=86400`, host, h3.Port)
}

// serveHTTP3 serves h over HTTP/3 on a QUIC listener of ours, so 0-RTT,
// Retry and the shared keys apply as on DoQ.
// Its conn records say h3 on a web listener, doh3 on a DoH/3 one.
func (s *Server) serveHTTP3(name, addr string, h http.Handler, web bool) error {
	label := "doh3"
	if web {
		label = "h3"
	}
	tlsConf := s.id.tlsConfig(http3.NextProtoH3)
	if web {
		tlsConf = s.withECH(tlsConf, nil)
	}
	eln, err := s.listenQUIC(name, addr, tlsConf, nil)
	if err != nil {
		return err
	}
	// Refusals and aborted handshakes carry the listener's own transport:
	// a browser's on the web listener is h3, not DoH/3.
	ln := s.limitQUIC(eln, name, label, h3ExcessiveLoad, h3NoError)
	// A connection with a request in flight is busy: the pool closes
	// only idle ones to make room. A request is in flight once it has
	// arrived whole (its body read to the end), so a request whose body
	// never ends holds nothing until its deadline resets it.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(quicConnKey{}).(*quic.Conn); ok {
			if sl := ln.slot(c); sl != nil {
				b := &busyOnEnd{ReadCloser: r.Body, sl: sl}
				defer b.done()
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					b.begin() // no body to wait for, nor to cancel
				}
				r.Body = b
				w = stallWriter{ResponseWriter: w, sl: sl}
			}
		}
		h.ServeHTTP(w, r)
	})
	var open func(c *quic.Conn) (h3Conn, error)
	dnsStreams := web && !s.cfg.Web.NoDNSStream
	if web {
		// The web listener's HTTP/3 is doxlab's own, so that its ORIGIN
		// frame goes on the control stream (docs/origin.md).
		cfg := &h3server.Config{Handler: handler, IdleTimeout: s.cfg.Limits.IdleTimeout, MaxHeaderBytes: maxHeaderBytes,
			StreamTimeout: s.cfg.Limits.HandshakeTimeout}
		if dnsStreams {
			cfg.Settings = map[uint64]uint64{dnswire.DNSStreamSetting: 1}
		}
		origins := s.webOrigins(addr)
		if len(origins) > 0 {
			if cfg.ControlFrames, err = h3ext.AppendOrigin(nil, origins); err != nil {
				return err
			}
		}
		open = func(c *quic.Conn) (h3Conn, error) {
			s.recordQUICConn(c, name, label, origins)
			ctx := context.WithValue(c.Context(), quicConnKey{}, c)
			ctx = context.WithValue(ctx, http.LocalAddrContextKey, c.LocalAddr())
			return h3server.New(ctx, c, cfg)
		}
	} else {
		srv := &http3.Server{
			Handler:     handler,
			IdleTimeout: s.cfg.Limits.IdleTimeout,
			// A header block is read whole before it is parsed: bounded,
			// and advertised as SETTINGS_MAX_FIELD_SECTION_SIZE.
			MaxHeaderBytes: maxHeaderBytes,
			ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
				s.recordQUICConn(c, name, label, nil)
				return context.WithValue(ctx, quicConnKey{}, c)
			},
		}
		s.track(name+"-h3", nil, srv)
		open = func(c *quic.Conn) (h3Conn, error) { return srv.NewRawServerConn(c) }
	}
	s.goServe(func() {
		for {
			c, err := ln.Accept(s.ctx)
			if err != nil {
				return
			}
			go s.serveH3Conn(c, ln.slot(c), name, dnsStreams, open)
		}
	})
	return nil
}

// h3Conn is the HTTP/3 server side of one QUIC connection: quic-go's
// on the DoH/3 listener, doxlab's own on the web listener.
type h3Conn interface {
	HandleRequestStream(*quic.Stream)
	HandleUnidirectionalStream(*quic.ReceiveStream)
}

// serveH3Conn runs one HTTP/3 connection's stream loops, so that a
// bidirectional stream that opens with the DNS stream signal is answered
// as DNS (docs/dnsstream.md) and every other one goes to HTTP/3 as it
// came. Closing the listener's transport closes the connection.
func (s *Server) serveH3Conn(c *quic.Conn, sl *slot, name string, dnsStreams bool, open func(*quic.Conn) (h3Conn, error)) {
	hc, err := open(c) // opens the control stream, with SETTINGS
	if err != nil {
		c.CloseWithError(h3InternalError, "")
		return
	}
	go func() {
		for {
			str, err := c.AcceptUniStream(c.Context())
			if err != nil {
				return
			}
			go func() {
				hc.HandleUnidirectionalStream(str)
				// quic-go's HTTP/3 returns at once on the QPACK encoder and
				// decoder streams (it uses no dynamic table) without reading
				// them, so what a peer sends there would sit in the
				// flow-control window: read and discard it. On any other
				// stream it returns once the stream is done.
				io.Copy(io.Discard, str)
			}()
		}
	}()
	d := &doqConn{s: s, c: c, sl: sl, listener: name, transport: "dnsstream", codes: dnsStreamCodes}
	for {
		str, err := c.AcceptStream(c.Context())
		if err != nil {
			return
		}
		connInfo(c).ech.Load().settle(false) // a request: not an ECH rejection
		// As for DoQ: the handshake's state when the stream is accepted.
		received, done := time.Now(), handshakeDone(c)
		d.open.Add(1)
		s.workers.run(func() {
			// A request must arrive whole (a DNS stream's signal, or the
			// headers and body) within handshake_timeout, and its answer
			// be taken within idle_timeout; past either, the HTTP/3 layer
			// resets the stream (H3_REQUEST_INCOMPLETE).
			str.SetReadDeadline(received.Add(s.cfg.Limits.HandshakeTimeout))
			str.SetWriteDeadline(received.Add(s.cfg.Limits.IdleTimeout))
			if dnsStreams && d.isDNSStream(str) {
				// A DNS stream in flight keeps the connection from its
				// HTTP/3 idle timeout, as a request does.
				if h, ok := hc.(interface{ Hold() func() }); ok {
					defer h.Hold()()
				}
				d.streamDone(received, d.serveStream(str, received, done))
				return
			}
			hc.HandleRequestStream(str)
			d.streamDone(received, false)
		})
	}
}

// maxHeaderBytes bounds an HTTP/3 request's header block: Chromium's
// requests carry 1-3 kB, and nginx's default buffers hold 32 kB.
const maxHeaderBytes = 32 << 10

// busyOnEnd marks a connection busy once its request has arrived whole:
// its body read to the end (or at once, for a request without one), and
// idle again when the handler returns.
type busyOnEnd struct {
	io.ReadCloser
	sl    *slot
	began bool // the handler's goroutine alone reads and sets it
}

func (b *busyOnEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.begin()
	}
	return n, err
}

func (b *busyOnEnd) begin() {
	if !b.began {
		b.began = true
		b.sl.begin()
	}
}

// done ends the request: idle again if it was answered whole; a body
// not read to its end is no longer read (its stream's receiving side is
// cancelled), so one that never ends holds the stream no longer.
func (b *busyOnEnd) done() {
	if b.began {
		b.sl.end()
		return
	}
	b.ReadCloser.Close()
}

// isDNSStream reads a DNS stream's signal off str, or leaves a request
// stream untouched. The caller's read deadline bounds the wait.
func (d *doqConn) isDNSStream(str *quic.Stream) bool {
	ok, err := dnswire.IsDNSStream(str)
	return err == nil && ok && dnswire.SkipDNSStreamSignal(str) == nil
}

func (s *Server) serveDoH3(addr string) error {
	return s.serveHTTP3("doh3", addr, s.dohMux("doh3"), false)
}

package transport

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// dohTransport is DoH (RFC 8484) over HTTP/1.1 or HTTP/2. It dials TCP and
// TLS itself, so each phase is timed at the socket and every connection
// is metered; net/http does the HTTP.
type dohTransport struct {
	*base
	alpn  string
	mu    sync.Mutex
	hc    *http.Transport // kept when Reuse
	conns sync.Map        // *tls.Conn -> *streamConn
}

type exchKey struct{}

func newDoH(b *base) *dohTransport {
	t := &dohTransport{base: b, alpn: "h2"}
	if b.ep.Protocol == ProtoDoH1 {
		t.alpn = "http/1.1"
	}
	return t
}

func (t *dohTransport) Exchange(ctx context.Context, q *dns.Msg) (*Record, error) {
	return t.runOblivious(ctx, q, t.exchange)
}

func (t *dohTransport) httpTransport() *http.Transport {
	hc := &http.Transport{
		DialTLSContext:     t.dialTLS,
		DisableCompression: true,
		MaxConnsPerHost:    1, // one persistent connection, as the papers measure
		IdleConnTimeout:    90 * time.Second,
		Protocols:          new(http.Protocols),
	}
	if t.alpn == "h2" {
		hc.Protocols.SetHTTP2(true)
	} else {
		hc.Protocols.SetHTTP1(true)
	}
	return hc
}

// dialTLS is net/http's dialer: TCP connect and TLS handshake, each timed
// into the exchange that asked for the connection.
func (t *dohTransport) dialTLS(ctx context.Context, _, _ string) (net.Conn, error) {
	tm := new(Timing)
	if x, ok := ctx.Value(exchKey{}).(*exch); ok {
		tm = &x.rec.Timing
	}
	sc, err := t.dialStream(ctx, tm, true, []string{t.alpn})
	if err != nil {
		return nil, err
	}
	if alpn := sc.info.ALPN; alpn != t.alpn && !(t.alpn == "http/1.1" && alpn == "") {
		sc.c.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w: server chose ALPN %q, not %q", sc.info.RemoteAddr, errTLSHandshake, alpn, t.alpn)
	}
	t.conns.Store(sc.c, sc)
	return sc.c, nil
}

func (t *dohTransport) exchange(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error) {
	hc := t.get()
	mark := t.opts.Session.ticketMark("tcp", t.serverName())
	if !t.opts.Reuse {
		defer func() {
			t.opts.Session.waitTicket(context.Background(), "tcp", t.serverName(), mark, ticketGrace)
			hc.CloseIdleConnections()
		}()
	}
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing query: %w", err)
	}
	wire[0], wire[1] = 0, 0 // RFC 8484 §4.1: ID 0 makes GETs cache-friendly

	var (
		dc      *streamConn
		reused  bool
		gotConn time.Time
		bytes0  snapshot
		segs0   Counts
	)
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { x.answerFirst = time.Now() }, GotConn: func(info httptrace.GotConnInfo) {
		gotConn, reused = time.Now(), info.Reused
		if v, ok := t.conns.Load(info.Conn); ok {
			dc = v.(*streamConn)
			if reused {
				bytes0 = dc.m.snap()
				segs0, _ = tcpSegments(dc.raw)
			}
			dc.m.arm()
			dc.w.arm()
		}
	}}
	ctx = httptrace.WithClientTrace(context.WithValue(ctx, exchKey{}, x), trace)
	req, err := t.dohRequest(ctx, x, strings.ToUpper(orDefault(t.opts.Method, "get")), wire, q)
	if err != nil {
		return nil, err
	}
	resp, err := hc.RoundTrip(req)
	var body []byte
	if err == nil {
		body, err = dnswire.ReadBody(resp.Body)
		x.answered = time.Now()
		x.rec.Conn.HTTPStatus = resp.StatusCode
	}
	// The connection's facts, also when the request failed on it (a
	// stream reset, a connection closed mid-answer): traffic flowed.
	if dc != nil {
		status := x.rec.Conn.HTTPStatus
		x.rec.Conn = dc.info
		x.rec.Conn.HTTPStatus = status
		x.querySent = dc.m.firstWriteAfterArm()
		x.rec.Bytes, x.rec.Packets = dc.usage(bytes0, segs0)
		x.wireFrom(dc.w, reused, time.Time{})
	}
	if x.querySent.IsZero() {
		x.querySent = gotConn
	}
	x.rec.Conn.Reused = reused
	if err != nil {
		return nil, err
	}
	x.rec.DNSBytes = Counts{Sent: int64(len(wire)), Received: int64(len(body))}
	m, err := t.dohDecode(x, resp, body, q)
	if err != nil {
		return nil, err
	}
	m.Id = q.Id
	return m, nil
}

// dohRequest is a query's HTTP request: DoH's (RFC 8484), or with ODoH
// the query sealed to the target and POSTed to the proxy.
func (b *base) dohRequest(ctx context.Context, x *exch, method string, wire []byte, q *dns.Msg) (*http.Request, error) {
	if b.obl != nil {
		return b.obl.request(ctx, x, b.target(), wire)
	}
	return dnswire.NewDoHRequest(ctx, b.target(), method, b.opts.JSON, wire, q)
}

// dohDecode reads the answer of dohRequest's request.
func (b *base) dohDecode(x *exch, resp *http.Response, body []byte, q *dns.Msg) (*dns.Msg, error) {
	if b.obl != nil {
		return b.obl.decode(x, resp, body, q)
	}
	return dnswire.DecodeDoHResponse(resp.StatusCode, resp.Header.Get("Content-Type"), body, b.opts.JSON, q)
}

func (t *dohTransport) get() *http.Transport {
	if !t.opts.Reuse {
		return t.httpTransport()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hc == nil {
		t.hc = t.httpTransport()
	}
	return t.hc
}

func (t *dohTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hc != nil {
		t.hc.CloseIdleConnections()
		t.hc = nil
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// ticketGrace bounds the wait for a session ticket before a fresh
// connection is closed; it is spent after the exchange is timed.
const ticketGrace = 100 * time.Millisecond

// streamTransport is DNS over TCP (RFC 7766) and over TLS (RFC 7858): a
// 2-octet length prefix per message, and with Reuse, pipelined queries
// whose answers are matched by ID in whatever order they come. It also
// carries DoH over HTTP/1.1 with pipelining (RFC 9112 §9.3), which
// net/http does not do: GET requests written back to back on one
// connection, responses read in order (the server's answer keeps the
// query's ID, so the same matching works).
type streamTransport struct {
	*base
	kept slot[*streamConn]
}

// streamConn is a TCP connection, maybe inside TLS, metered at the socket.
// DoH uses it too, without the mux.
type streamConn struct {
	raw  *net.TCPConn
	c    net.Conn // raw, metered, maybe inside TLS
	m    *meter
	w    *wireClock // kernel timestamps; nil without
	mux  *mux
	info ConnInfo // facts fixed at the handshake
}

func (t *streamTransport) Exchange(ctx context.Context, q *dns.Msg) (*Record, error) {
	return t.run(ctx, q, t.exchange)
}

func (t *streamTransport) tls() bool { return t.ep.Protocol != ProtoTCP }

func (t *streamTransport) pipelinedDoH() bool { return t.ep.Protocol == ProtoDoH1 }

func (t *streamTransport) exchange(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error) {
	mark := t.opts.Session.ticketMark("tcp", t.serverName())
	sc, reused, err := t.kept.get(t.opts.Reuse, func(sc *streamConn) bool { return sc.mux.alive() },
		func() (*streamConn, error) { return t.dial(ctx, x) })
	if err != nil {
		return nil, err
	}
	if !t.opts.Reuse {
		defer func() {
			if t.tls() {
				t.opts.Session.waitTicket(context.Background(), "tcp", t.serverName(), mark, ticketGrace)
			}
			sc.c.Close()
		}()
	}
	x.rec.Conn = sc.info
	x.rec.Conn.Reused = reused
	var bytes0 snapshot
	var segs0 Counts
	if reused {
		bytes0 = sc.m.snap()
		segs0, _ = tcpSegments(sc.raw)
	}
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing query: %w", err)
	}
	a, sent, wireSent, err := sc.mux.exchange(ctx, wire)
	x.querySent = sent
	x.rec.Bytes, x.rec.Packets = sc.usage(bytes0, segs0) // also when it failed: traffic flowed
	if err != nil {
		if !t.opts.Reuse || !sc.mux.alive() {
			t.drop(sc)
		}
		if h, ok := errors.AsType[*HTTPError](err); ok && t.pipelinedDoH() {
			x.rec.Conn.HTTPStatus = h.Code
		}
		return nil, err
	}
	x.answered = a.at
	x.answerFirst = a.first
	x.wireFrom(sc.w, reused, wireSent)
	x.rec.DNSBytes = Counts{Sent: int64(len(wire)), Received: int64(len(a.msg))}
	if t.pipelinedDoH() {
		x.rec.Conn.HTTPStatus = http.StatusOK // the reader ends the connection on any other
	}
	resp, err := dnswire.Unpack(a.msg)
	if err != nil {
		return nil, err
	}
	resp.Id = q.Id
	return resp, nil
}

// dial opens the connection and frames it for DNS: a 2-octet length per
// message, answers matched by ID.
func (t *streamTransport) dial(ctx context.Context, x *exch) (*streamConn, error) {
	var alpn []string
	if t.tls() {
		alpn = []string{"dot"}
	}
	if t.pipelinedDoH() {
		alpn = []string{"http/1.1"}
	}
	sc, err := t.dialStream(ctx, &x.rec.Timing, t.tls(), alpn)
	if err != nil {
		return nil, err
	}
	c := sc.c
	st := &stamper{Conn: c}
	if t.pipelinedDoH() {
		br := bufio.NewReader(st)
		sc.mux = newMux(
			func(b []byte) (time.Time, error) {
				req, err := dnswire.NewDoHRequest(context.Background(), t.target(), http.MethodGet, false, b, nil)
				if err != nil {
					return time.Time{}, err
				}
				var buf bytes.Buffer
				if err := req.Write(&buf); err != nil {
					return time.Time{}, err
				}
				sc.w.arm()
				_, err = c.Write(buf.Bytes())
				return sc.w.queryOut(), err
			},
			func() ([]byte, error) {
				st.arm(br.Buffered() > 0)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return nil, err
				}
				body, err := dnswire.ReadBody(resp.Body)
				if err != nil {
					return nil, err
				}
				if _, err := dnswire.DecodeDoHResponse(resp.StatusCode, resp.Header.Get("Content-Type"), body, false, nil); err != nil {
					return nil, err // out of step with the requests: the connection ends
				}
				return body, nil
			},
			st.firstOctet, true)
		return sc, nil
	}
	sc.mux = newMux(
		func(b []byte) (time.Time, error) {
			buf, err := dnswire.AppendPrefixed(make([]byte, 0, len(b)+2), b)
			if err != nil {
				return time.Time{}, err
			}
			sc.w.arm()
			_, err = c.Write(buf) // one write: prefix and message in one segment
			return sc.w.queryOut(), err
		},
		func() ([]byte, error) { st.arm(false); return dnswire.ReadPrefixed(st) },
		st.firstOctet, true)
	return sc, nil
}

// dialStream opens a TCP connection, and with secure runs the TLS
// handshake over it, timing each phase into tm.
func (b *base) dialStream(ctx context.Context, tm *Timing, secure bool, alpn []string) (*streamConn, error) {
	addr, err := b.serverAddr(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ready, synSent := t0, t0
	var raw *net.TCPConn
	var laddr net.Addr
	if b.opts.LocalAddr != "" {
		la, _ := localAddr(b.opts.LocalAddr)
		laddr = la(b.ep.Protocol)
	}
	err = b.openSocket(func() (err error) {
		raw, ready, synSent, err = dialTCP(ctx, laddr, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	connected := time.Now()
	tm.SocketMs = ms(ready.Sub(t0))
	tm.ConnectMs = ms(connected.Sub(ready))
	sc := &streamConn{raw: raw, m: &meter{}}
	var wc net.Conn
	wc, sc.w = wire(raw)
	// The kernel timestamps no SYN: it left within connect(2) (dialTCP).
	sc.w.setFirstOut(synSent)
	sc.c = &meteredConn{Conn: wc, m: sc.m}
	sc.info.LocalAddr, sc.info.RemoteAddr = raw.LocalAddr().String(), raw.RemoteAddr().String()
	if !secure {
		return sc, nil
	}
	tc := tls.Client(sc.c, b.tlsConfig(alpn, b.opts.Session.ticketView("tcp")))
	err = tc.HandshakeContext(ctx)
	tm.HandshakeMs = ms(time.Since(connected))
	if err != nil {
		de := &dialError{err: fmt.Errorf("TLS handshake with %s: %w", addr, tlsErr(err)), conn: sc.info}
		copyTLSFacts(&de.conn, tc.ConnectionState())
		b.echFacts(&de.conn, tc.ConnectionState(), err)
		de.bytes, de.pkts = sc.usage(snapshot{}, Counts{})
		raw.Close()
		return nil, de
	}
	copyTLSFacts(&sc.info, tc.ConnectionState())
	b.echFacts(&sc.info, tc.ConnectionState(), nil)
	sc.c = tc
	return sc, nil
}

// stamper notes when the first octet of a message arrives: the reader
// arms it before each message (already, when the octets were buffered),
// and the next read that returns data sets the time.
type stamper struct {
	net.Conn
	armed bool
	first time.Time
}

func (s *stamper) arm(already bool) {
	s.armed, s.first = !already, time.Time{}
	if already {
		s.first = time.Now()
	}
}

func (s *stamper) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if n > 0 && s.armed {
		s.first, s.armed = time.Now(), false
	}
	return n, err
}

func (s *stamper) firstOctet() time.Time { return s.first }

// usage is what the connection carried since (bytes0, segs0): octets at
// the socket, and TCP segments from TCP_INFO where the kernel gives them.
func (sc *streamConn) usage(bytes0 snapshot, segs0 Counts) (bytes, pkts Counts) {
	bytes = sc.m.snap().since(bytes0).bytes
	if segs, ok := tcpSegments(sc.raw); ok {
		pkts = Counts{Sent: segs.Sent - segs0.Sent, Received: segs.Received - segs0.Received}
	}
	return bytes, pkts
}

func (t *streamTransport) drop(sc *streamConn) {
	t.kept.drop(sc)
	sc.c.Close()
}

func (t *streamTransport) Close() error {
	if sc, ok := t.kept.take(); ok {
		sc.c.Close()
	}
	return nil
}

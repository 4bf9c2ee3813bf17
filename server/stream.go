package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// serveStream answers DNS over TCP (RFC 7766) or, with secure, over TLS
// (RFC 7858, ALPN dot). Pipelined queries are answered as soon as each is
// ready, or strictly in order with faults.in_order.
func (s *Server) serveStream(name, addr string, secure bool) error {
	ln, err := s.listenTCP(addr)
	if err != nil {
		return err
	}
	s.track(name, ln.Addr(), ln)
	lim := s.cfg.Limits
	conns := newPool(lim.MaxConns, lim.MaxConnsPerSource, lim.StallTimeout)
	transport := "tcp"
	if secure {
		transport = "dot"
	}
	s.goServe(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			sl := s.admit(conns, name, transport, c.RemoteAddr(), func() { c.Close() })
			if sl == nil {
				c.Close()
				continue
			}
			sc := newStallConn(c)
			sc.sl.Store(sl)
			go func() {
				defer sl.release()
				s.serveStreamConn(name, sc, secure, sl)
			}()
		}
	})
	return nil
}

func (s *Server) serveStreamConn(name string, c net.Conn, secure bool, sl *slot) {
	defer c.Close()
	raw := c // the TCP socket under TLS, for quickAck
	base := Record{Transport: "tcp", Listener: name, Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String()}
	lim := s.cfg.Limits
	// The handshake and the first query share one deadline, so a client
	// that connects and sends nothing (or half a message) holds its slot
	// for handshake_timeout, not idle_timeout.
	firstBy := time.Now().Add(lim.HandshakeTimeout)
	c.SetDeadline(firstBy)
	if secure {
		tc, ok := s.dotHandshake(name, c, &base)
		if !ok {
			return
		}
		c = tc
	}
	// Answers go through one buffer: a query answered inline while more
	// are already read waits for them, so pipelined queries' answers
	// leave in one write (and one TLS record) instead of one each.
	var wmu sync.Mutex
	bw := bufio.NewWriterSize(c, 16<<10)
	write := func(r *dns.Msg, flush bool) bool {
		out, err := r.Pack()
		if err != nil {
			return false
		}
		wmu.Lock()
		defer wmu.Unlock()
		if len(out) > dnswire.MaxMsg {
			return false
		}
		bw.Write([]byte{byte(len(out) >> 8), byte(len(out))})
		bw.Write(out)
		if !flush {
			return true
		}
		c.SetWriteDeadline(time.Now().Add(lim.IdleTimeout))
		return bw.Flush() == nil
	}
	flushPending := func() {
		wmu.Lock()
		defer wmu.Unlock()
		if bw.Buffered() > 0 {
			c.SetWriteDeadline(time.Now().Add(lim.IdleTimeout))
			bw.Flush()
		}
	}
	inline := s.cfg.Faults.InOrder || s.quick()
	refuse := func(reason Reason, detail string) {
		s.refuse(name, base.Transport, c.RemoteAddr(), reason, detail)
	}
	streams := make(chan struct{}, lim.MaxStreams)
	var wg sync.WaitGroup
	defer wg.Wait()
	br := bufio.NewReader(c)
	defer flushPending() // answers still buffered leave before the connection closes
	if secure {
		// A client that sends its query with the Finished is answered as
		// ever. One that holds it (Nagle, waiting for the Finished's ACK)
		// gets the ACK after 2 ms instead of our delayed one, 40 ms on.
		c.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
		if _, err := br.Peek(1); err != nil && isTimeout(err) {
			quickAck(raw)
		}
		c.SetReadDeadline(firstBy)
	}
	for first := true; ; first = false {
		if !first {
			if br.Buffered() == 0 {
				flushPending() // nothing more read: what is answered leaves now
			}
			// Between queries a connection may idle; once a query has
			// begun it must arrive whole within handshake_timeout.
			c.SetReadDeadline(time.Now().Add(lim.IdleTimeout))
			if _, err := br.Peek(1); err != nil {
				return // EOF or idle timeout
			}
			c.SetReadDeadline(time.Now().Add(lim.HandshakeTimeout))
		}
		if partial(br) {
			quickAck(raw) // a query began: its rest must not wait for our ACK
		}
		wire, err := dnswire.ReadPrefixed(br)
		if err != nil {
			switch {
			case errors.Is(err, dnswire.ErrMalformed):
				refuse(ReasonFraming, err.Error())
			case isTimeout(err):
				refuse(ReasonSlow, "query not received whole in time")
			}
			return // EOF, timeout or broken framing: close the connection
		}
		received := time.Now()
		q, err := dnswire.Unpack(wire)
		if err != nil || len(wire) > lim.MaxMsg {
			reason := ReasonMalformed
			if err == nil {
				reason, err = ReasonTooLarge, fmt.Errorf("%d octets", len(wire))
			}
			refuse(reason, err.Error())
			// Answer FORMERR when the header is readable and is a query's
			// (RFC 1035 §4.1.1).
			if len(wire) >= dnswire.MinMsg && wire[2]&0x80 == 0 {
				r := new(dns.Msg)
				r.Id, r.Response, r.Rcode = uint16(wire[0])<<8|uint16(wire[1]), true, dns.RcodeFormatError
				write(r, true)
			}
			continue
		}
		if q.Response {
			// Never answer an answer: two servers would answer each other
			// for ever. Unbound and dnsdist drop it; on a stream the peer
			// is not speaking DNS as a client, so the connection ends.
			refuse(ReasonResponse, "QR=1")
			return
		}
		rec := base
		sl.begin()
		if inline {
			// Quick (or in order by request): answered here, flushed
			// once no further query is already read.
			r := s.handle(s.ctx, q, &rec, received)
			ok := r == nil || write(r, br.Buffered() == 0)
			sl.end()
			if !ok {
				return
			}
			continue
		}
		streams <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { sl.end(); <-streams; wg.Done() }()
			if r := s.handle(s.ctx, q, &rec, received); r != nil {
				write(r, true)
			}
		}()
	}
}

// dotHandshake runs DoT's TLS handshake on c and records the connection
// (or refuses it: a handshake that failed or was too slow); base gets
// the connection's TLS facts for its queries' records.
func (s *Server) dotHandshake(name string, c net.Conn, base *Record) (*tls.Conn, bool) {
	base.Transport = "dot"
	alpn := []string{"dot"}
	if s.cfg.TLS.NoDoTALPN {
		alpn = nil
	}
	tc := tls.Server(c, dotALPN(s.tcpTLS(alpn...)))
	start := time.Now()
	if err := tc.Handshake(); err != nil {
		s.record(&Record{Kind: "conn", Transport: "dot", Listener: name, Remote: base.Remote, Local: base.Local, Began: start, Error: err.Error()})
		reason := ReasonHandshake
		if isTimeout(err) {
			reason = ReasonSlow
		}
		s.refuse(name, "dot", c.RemoteAddr(), reason, err.Error())
		return nil, false
	}
	tlsFacts(base, tc.ConnectionState())
	conn := *base
	conn.Kind, conn.HandshakeMs, conn.Began = "conn", ms(time.Since(start)), start
	s.record(&conn)
	return tc, true
}

// quickAck has the kernel acknowledge what it has received at once
// (TCP_QUICKACK), sending an ACK it had delayed. A client that leaves
// Nagle's algorithm on (stubby, Unbound's DoT forwarding, dnsdist,
// hickory) holds its next small write until its last is acknowledged:
// the query after the TLS Finished, or a message after its length
// prefix, waited for our delayed ACK, ~40 ms. It is set only where a
// client may be waiting (no query 2 ms after the handshake, half a
// message read), so a client that sends whole queries sees no extra
// packet; Linux leaves quick-ACK mode again on its own.
func quickAck(c net.Conn) {
	if sc := stallOf(c); sc != nil {
		c = sc.Conn
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	if rc, err := tc.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { setQuickAck(fd) })
	}
}

// partial says whether br holds the start of a length-prefixed message
// but not all of it: the client may be waiting for our ACK to send the
// rest. An empty buffer is not partial: nothing began.
func partial(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	if n < 2 {
		return true
	}
	p, _ := br.Peek(2)
	return n < 2+(int(p[0])<<8|int(p[1]))
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// listenTCP listens for TCP, with TCP Fast Open (RFC 7413) when the
// config asks for it. The kernel must allow it too: net.ipv4.tcp_fastopen
// with bit 0x2 in the server's network namespace.
func (s *Server) listenTCP(addr string) (net.Listener, error) {
	lc := net.ListenConfig{}
	if s.cfg.Limits.TCPFastOpen {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = setTCPFastOpen(fd)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	return lc.Listen(context.Background(), "tcp", addr)
}

// dotALPN makes cfg negotiate no application protocol with a client
// whose ALPN list lacks "dot" (an HTTP client's http/1.1 only): RFC 7858
// defines no ALPN, so such a client speaks DoT all the same; Go's
// default is to refuse it (no_application_protocol).
func dotALPN(cfg *tls.Config) *tls.Config {
	if len(cfg.NextProtos) == 0 {
		return cfg
	}
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if len(hello.SupportedProtos) == 0 || slices.Contains(hello.SupportedProtos, "dot") {
			return nil, nil
		}
		c := cfg.Clone()
		c.NextProtos, c.GetConfigForClient = nil, nil
		return c, nil
	}
	return cfg
}

package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/dnswire"
)

var draftALPNs = []string{"doq-i11", "doq-i10", "doq-i09", "doq-i08", "doq-i07", "doq-i06", "doq-i05", "doq-i04", "doq-i03", "doq-i02", "doq-i01", "doq-i00"}

// serveDoQ answers DNS over QUIC (RFC 9250): one query per stream.
func (s *Server) serveDoQ(addr string) error {
	alpn := []string{"doq"}
	if s.cfg.QUIC.DraftALPNs {
		alpn = append(alpn, draftALPNs...)
	}
	if len(s.cfg.QUIC.ALPNs) > 0 {
		alpn = s.cfg.QUIC.ALPNs
	}
	lim := s.cfg.Limits
	eln, err := s.listenQUIC("doq", addr, s.id.tlsConfig(alpn...), func(c *quic.Config) {
		// quic-go buffers what a peer sends until it is read: flow control
		// windows no larger than a query (per stream) and than the
		// connection's buffer bound keep a stalled client from making the
		// server hold more.
		c.InitialStreamReceiveWindow = dnswire.MaxMsg + 2
		c.MaxStreamReceiveWindow = dnswire.MaxMsg + 2
		c.InitialConnectionReceiveWindow = uint64(max(lim.MaxConnBuffer, dnswire.MaxMsg+2))
		c.MaxConnectionReceiveWindow = c.InitialConnectionReceiveWindow
		// One, so that the first unidirectional stream can be accepted and
		// answered with DOQ_PROTOCOL_ERROR (RFC 9250 §4.2: DNS uses
		// bidirectional streams only); quic-go would otherwise buffer them.
		c.MaxIncomingUniStreams = 1
	})
	if err != nil {
		return err
	}
	ln := s.limitQUIC(eln, "doq", "doq", doqExcessiveLoad, doqNoError)
	s.goServe(func() {
		for {
			c, err := ln.Accept(s.ctx)
			if err != nil {
				return
			}
			s.recordQUICConn(c, "doq", "doq", nil)
			go s.serveDoQConn(c, ln.slot(c))
		}
	})
	return nil
}

// doqConn is what a connection's DNS streams share: a DoQ connection's,
// or an HTTP/3 connection's DNS streams (dnswire.IsDNSStream).
type doqConn struct {
	s        *Server
	c        *quic.Conn
	sl       *slot
	buffered atomic.Int64 // octets of unfinished queries held
	open     atomic.Int64 // bidirectional streams being served

	listener, transport string
	codes               streamCodes
}

// streamCodes are the error codes a connection's DNS streams end with:
// DoQ's (RFC 9250 §4.3), or HTTP/3's on a DNS stream.
type streamCodes struct {
	noError, protocol, cancelled, excessive quic.ApplicationErrorCode
	// protocolPerStream resets only the offending stream on a protocol
	// error: on an HTTP/3 connection a bad DNS stream must not take the
	// page's requests down with it. DoQ closes the connection (§4.3.3).
	protocolPerStream bool
}

var (
	doqCodes       = streamCodes{doqNoError, doqProtocolError, doqRequestCancelled, doqExcessiveLoad, false}
	dnsStreamCodes = streamCodes{h3NoError, h3MessageError, h3RequestCancelled, h3ExcessiveLoad, true}
)

// fail closes the connection with code and counts why.
func (d *doqConn) fail(code quic.ApplicationErrorCode, reason Reason, msg string) {
	d.s.refuse(d.listener, d.transport, d.c.RemoteAddr(), reason, msg)
	d.c.CloseWithError(code, msg)
}

// protocolError ends a stream that broke the framing rules: the
// connection for DoQ, the stream alone on HTTP/3.
func (d *doqConn) protocolError(str *quic.Stream, reason Reason, msg string) {
	if !d.codes.protocolPerStream {
		d.fail(d.codes.protocol, reason, msg)
		return
	}
	d.s.refuse(d.listener, d.transport, d.c.RemoteAddr(), reason, msg)
	str.CancelRead(quic.StreamErrorCode(d.codes.protocol))
	str.CancelWrite(quic.StreamErrorCode(d.codes.protocol))
}

func (s *Server) serveDoQConn(c *quic.Conn, sl *slot) {
	d := &doqConn{s: s, c: c, sl: sl, listener: "doq", transport: "doq", codes: doqCodes}
	go func() {
		if _, err := c.AcceptUniStream(c.Context()); err == nil {
			d.fail(doqProtocolError, ReasonProtocol, "unidirectional stream")
		}
	}()
	// The first query must come within handshake_timeout of the
	// connection; later ones may wait for the idle timeout.
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Limits.HandshakeTimeout)
	defer cancel()
	for {
		str, err := c.AcceptStream(ctx)
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded && c.Context().Err() == nil {
				d.fail(doqNoError, ReasonSlow, "no query in time")
			}
			return
		}
		cancel()
		ctx = s.ctx
		// Look at the handshake as the stream is accepted, not when its
		// goroutine runs: under load that can be after the client's
		// Finished has arrived.
		received, done := time.Now(), handshakeDone(c)
		d.open.Add(1)
		s.workers.run(func() { d.streamDone(received, d.serveStream(str, received, done)) })
	}
}

// streamDone ends a stream of the connection's. A connection whose only
// streams were stalled (reset for slowness, or ended slow with no query
// or request arriving whole since they began) holds a slot for nothing:
// it is closed, as a TCP connection that stalls a query is. One that is
// serving anything else is left alone.
func (d *doqConn) streamDone(received time.Time, slow bool) {
	if d.open.Add(-1) > 0 || d.c.Context().Err() != nil {
		return
	}
	timeout := d.s.cfg.Limits.HandshakeTimeout
	if !slow {
		slow = time.Since(received) >= timeout && d.sl != nil && !d.sl.arrivedSince(received)
	}
	if slow {
		d.fail(d.codes.noError, ReasonSlow, "nothing but stalled streams")
	}
}

// serveStream reads a stream's query, answers it and checks its end. The
// connection counts as busy (not to be evicted) only while a query read
// whole is being answered: a stream whose query or FIN never comes holds
// nothing, so stalled streams cannot make a connection unevictable, and
// each is reset once handshake_timeout has passed: slow says so.
func (d *doqConn) serveStream(str *quic.Stream, received time.Time, doneAtAccept bool) (slow bool) {
	s, c := d.s, d.c
	rec := &Record{Transport: d.transport, Listener: d.listener, Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String()}
	quicFacts(rec, c)
	rec.EarlyData = !doneAtAccept
	// A query once begun must arrive whole within handshake_timeout.
	str.SetReadDeadline(time.Now().Add(s.cfg.Limits.HandshakeTimeout))
	prefixed := dnswire.DoQPrefixed(rec.ALPN)
	wire, err := d.readQuery(str, prefixed)
	if err != nil {
		var se *quic.StreamError
		switch {
		case errors.Is(err, io.EOF) && len(wire) == 0 && d.codes.protocolPerStream && c.Context().Err() == nil:
			// A DNS stream's signal and then its end: no message at all
			// (docs/dnsstream.md), H3_MESSAGE_ERROR.
			d.protocolError(str, ReasonFraming, "DNS stream ended with no message")
		case errors.As(err, &se) || errors.Is(err, io.EOF) && len(wire) == 0 || c.Context().Err() != nil:
			// the client gave up on the stream, or the connection is gone
		case errors.Is(err, errBufferFull):
			d.fail(d.codes.excessive, ReasonBuffer, err.Error())
		case isTimeout(err):
			s.refuse(d.listener, d.transport, c.RemoteAddr(), ReasonSlow, "query not received whole in time")
			str.CancelRead(quic.StreamErrorCode(d.codes.cancelled))
			str.CancelWrite(quic.StreamErrorCode(d.codes.cancelled))
			return true
		default:
			// RFC 9250 §4.3.3: a framing violation is a connection error.
			d.protocolError(str, ReasonFraming, "bad message framing: "+err.Error())
		}
		return false
	}
	if len(wire) > s.cfg.Limits.MaxMsg {
		d.protocolError(str, ReasonTooLarge, "query too large")
		return false
	}
	q, err := doqQuery(wire)
	if err != nil {
		reason := ReasonProtocol
		if errors.Is(err, errResponse) {
			reason = ReasonResponse
		}
		d.protocolError(str, reason, err.Error())
		return false
	}
	if d.sl != nil {
		d.sl.begin() // a whole query to answer: busy until the answer is written
	}
	answered := false
	end := func() {
		if d.sl != nil && !answered {
			answered = true
			d.sl.end()
		}
	}
	defer end()
	if rec.EarlyData && q.Opcode != dns.OpcodeQuery {
		// RFC 9250 §4.5: only QUERY and NOTIFY may be answered from 0-RTT.
		select {
		case <-c.HandshakeComplete():
		case <-c.Context().Done():
			return false
		}
	}
	r := s.handle(c.Context(), q, rec, received)
	if r == nil {
		return false // dropped: the client times out
	}
	r.Id = 0
	out, err := r.Pack()
	if err != nil {
		str.CancelWrite(quic.StreamErrorCode(d.codes.protocol))
		return false
	}
	if prefixed {
		out, _ = dnswire.AppendPrefixed(nil, out)
	}
	str.SetWriteDeadline(time.Now().Add(s.cfg.Limits.IdleTimeout))
	d.sl.writeBegin()
	str.Write(out)
	d.sl.writeEnd()
	str.Close()
	end() // answered: the connection may be idle again
	if prefixed {
		// RFC 9250 §4.2: one query per stream, then FIN. Answered first,
		// checked after, so the check costs no latency. A FIN that never
		// comes is waited for as long as a query may take, then the
		// stream is reset.
		str.SetReadDeadline(time.Now().Add(s.cfg.Limits.HandshakeTimeout))
		n, err := str.Read(make([]byte, 1))
		switch {
		case n > 0:
			d.protocolError(str, ReasonProtocol, "more than one message on a stream")
		case isTimeout(err):
			s.refuse(d.listener, d.transport, c.RemoteAddr(), ReasonSlow, "stream not ended in time after its answer")
			str.CancelRead(quic.StreamErrorCode(d.codes.cancelled))
			return true
		}
	}
	return false
}

// errResponse is a message with QR=1 where a query belongs. Answering
// it would let one spoofed message start an answer loop between servers;
// UDP, TCP, DoT and DoH refuse it too.
var errResponse = errors.New("a response (QR=1) sent as a query")

var errBufferFull = errors.New("unfinished queries exceed the connection's buffer")

// readQuery reads one query from a stream, growing its buffer only as
// octets arrive (a 2-octet prefix alone allocates nothing), and charging
// them to the connection's bound while the query is unfinished.
func (d *doqConn) readQuery(str *quic.Stream, prefixed bool) ([]byte, error) {
	var held int64
	defer func() { d.buffered.Add(-held) }()
	want := dnswire.MaxMsg + 1 // a draft's bare message runs to the FIN
	if prefixed {
		var hdr [2]byte
		if _, err := io.ReadFull(str, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, dnswire.Malformed("stream ended inside the length prefix")
			}
			return nil, err
		}
		if want = int(binary.BigEndian.Uint16(hdr[:])); want < dnswire.MinMsg {
			return nil, dnswire.Malformed("length prefix %d is shorter than a DNS header", want)
		}
	}
	// A prefixed message may be followed by nothing (RFC 9250 §4.2): the
	// reads take one octet more where it has arrived already (a second
	// query written with the first), so the stream is refused before it
	// is answered; what arrives later is checked after the answer.
	limit := want
	if prefixed {
		limit++
	}
	// Room for a typical query; doubled as more arrives, never beyond limit.
	buf := make([]byte, 0, min(limit, 512))
	for len(buf) < want {
		if len(buf) == cap(buf) {
			buf = append(buf[:cap(buf)], make([]byte, min(cap(buf), limit-cap(buf)))...)[:len(buf)]
		}
		n, err := str.Read(buf[len(buf):min(cap(buf), limit)])
		if n > 0 {
			held += int64(n)
			if d.buffered.Add(int64(n)) > int64(d.s.cfg.Limits.MaxConnBuffer) {
				return nil, errBufferFull
			}
			buf = buf[:len(buf)+n]
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if !prefixed || len(buf) == want {
					return buf, nil
				}
				return buf, dnswire.Malformed("stream ended %d octets into a %d-octet message", len(buf), want)
			}
			return buf, err
		}
	}
	if len(buf) > want {
		return buf[:want], dnswire.Malformed("more than one message on a stream")
	}
	return buf, nil
}

// doqQuery parses a DoQ query and applies RFC 9250's rules for it; an
// error is a connection error DOQ_PROTOCOL_ERROR.
func doqQuery(wire []byte) (*dns.Msg, error) {
	q, err := dnswire.Unpack(wire)
	if err != nil {
		return nil, err
	}
	if q.Response {
		return nil, errResponse
	}
	if q.Id != 0 { // §4.2.1
		return nil, errors.New("message ID is not 0")
	}
	if keepaliveOption(q) { // §5.5.2
		return nil, errors.New("edns-tcp-keepalive over DoQ")
	}
	return q, nil
}

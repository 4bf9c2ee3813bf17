package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/ech"
)

// The DoQ error codes (RFC 9250 §4.3).
const (
	doqNoError          quic.ApplicationErrorCode = 0x0
	doqProtocolError    quic.ApplicationErrorCode = 0x2
	doqRequestCancelled quic.ApplicationErrorCode = 0x3
	doqExcessiveLoad    quic.ApplicationErrorCode = 0x4
)

// quicConnInfo travels in a QUIC connection's context: what address
// validation did for it, and when its first packet arrived.
type quicConnInfo struct {
	start     time.Time
	retry     bool // a Retry of ours preceded this connection
	verified  bool // the address was validated (Retry or NEW_TOKEN token)
	tokenUsed bool // validated by a NEW_TOKEN token
	// tls holds the connection's TLS facts once its handshake is done:
	// they no longer change, and quic-go's ConnectionState copies the
	// whole TLS state, which per query cost DoH/3 8 % of its CPU.
	tls atomic.Pointer[tlsState]
	// ech follows the connection when it offered ECH (web.ech).
	ech atomic.Pointer[echConn]
}

// tlsState is what a record takes from a QUIC connection's state.
type tlsState struct {
	tls      tls.ConnectionState
	used0RTT bool
}

// state is c's TLS state, read once after the handshake.
func (ci *quicConnInfo) state(c *quic.Conn) *tlsState {
	if st := ci.tls.Load(); st != nil {
		return st
	}
	done := handshakeDone(c) // before the read: a state read after is final
	cs := c.ConnectionState()
	st := &tlsState{tls: cs.TLS, used0RTT: cs.Used0RTT}
	if done {
		ci.tls.Store(st)
	}
	return st
}

type quicInfoKey struct{}

func connInfo(c *quic.Conn) *quicConnInfo {
	if ci, ok := c.Context().Value(quicInfoKey{}).(*quicConnInfo); ok {
		return ci
	}
	return &quicConnInfo{}
}

// listenQUIC binds a QUIC listener with the shared token key, the Retry
// policy and 0-RTT as configured. Early listeners hand out connections
// before the handshake completes, which is what makes 0-RTT shorten an
// exchange (a plain Listen would wait for the handshake).
func (s *Server) listenQUIC(name, addr string, tlsConf *tls.Config, tune func(*quic.Config)) (*quic.EarlyListener, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	key := s.id.tokenKey
	var retried sync.Map // remote addr -> we sent it a Retry
	tr := &quic.Transport{
		Conn:              pc,
		TokenGeneratorKey: &key,
		ConnContext: func(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
			info := &quicConnInfo{start: time.Now(), verified: ci.AddrVerified}
			if _, ok := retried.LoadAndDelete(ci.RemoteAddr.String()); ok && ci.AddrVerified {
				info.retry = true
			} else if ci.AddrVerified {
				info.tokenUsed = true
			}
			return context.WithValue(ctx, quicInfoKey{}, info), nil
		},
	}
	if s.cfg.QUIC.NoTokens {
		tr.MaxTokenAge = time.Nanosecond // quic-go still sends NEW_TOKEN; none is ever valid
	}
	var seen sync.Map // IPs that have made contact, for retry: first
	switch s.cfg.QUIC.Retry {
	case "always":
		tr.VerifySourceAddress = func(a net.Addr) bool {
			retried.Store(a.String(), true)
			return true
		}
	case "first":
		// Decided once per client address and port: with a post-quantum
		// key share the ClientHello spans two Initial datagrams, and quic-go
		// asks for each. Answering them differently would race a Retry
		// against an accepted handshake.
		var decided sync.Map
		var n atomic.Int64
		tr.VerifySourceAddress = func(a net.Addr) bool {
			if d, ok := decided.Load(a.String()); ok {
				return d.(bool)
			}
			if n.Add(1)%100000 == 0 {
				decided.Clear() // bounded memory; a forgotten port at worst sees one more Retry
			}
			_, known := seen.LoadOrStore(a.(*net.UDPAddr).IP.String(), true)
			d, _ := decided.LoadOrStore(a.String(), !known)
			if d.(bool) {
				retried.Store(a.String(), true)
			}
			return d.(bool)
		}
	}
	conf := &quic.Config{
		Allow0RTT:          !s.cfg.QUIC.NoZeroRTT,
		MaxIncomingStreams: int64(s.cfg.Limits.MaxStreams),
		// HTTP/3 needs three unidirectional streams (control and QPACK),
		// DoQ none; a few more for GREASE. Each held open costs memory
		// until the connection ends, so they are few (quic-go allows 100).
		MaxIncomingUniStreams: maxUniStreams,
		MaxIdleTimeout:        s.cfg.Limits.IdleTimeout,
		Versions:              s.cfg.QUIC.versions(),
		// A connection that never completes its handshake is dropped after
		// handshake_timeout of silence, not idle_timeout.
		HandshakeIdleTimeout: s.cfg.Limits.HandshakeTimeout,
	}
	if tune != nil {
		tune(conf)
	}
	ln, err := tr.ListenEarly(tlsConf, conf)
	if err != nil {
		pc.Close()
		return nil, err
	}
	s.track(name, pc.LocalAddr(), closerFunc(func() error {
		ln.Close()
		tr.Close()
		return pc.Close() // quic-go leaves a socket it was handed open
	}))
	return ln, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// recordQUICConn writes a conn record once the handshake completes,
// with the origins announced on it.
func (s *Server) recordQUICConn(c *quic.Conn, name, transport string, origins []string) {
	// Its record is on its way once the handshake completed, or once the
	// connection ended (a client that got retry configs closes before its
	// Finished, and its rejection is recorded then).
	pc := s.pending.add(c, func() bool { return handshakeDone(c) || c.Context().Err() != nil })
	go func() {
		defer s.pending.remove(c, pc)
		unfinished := false
		select {
		case <-c.HandshakeComplete():
		case <-c.Context().Done():
			// A client that closes right after its Finished (a one-request
			// 0-RTT load) ends both at once; select picks either.
			if !handshakeDone(c) {
				// A client that got retry configs closes with ech_required:
				// the rejection is recorded; other aborts are not.
				if e := connInfo(c).ech.Load(); e != nil {
					cause := context.Cause(c.Context())
					e.settle(isECHRequired(cause))
					rec := &Record{Kind: "conn", Transport: transport, Listener: name, Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String(),
						HandshakeMs: ms(time.Since(connInfo(c).start)), Began: connInfo(c).start, Error: cause.Error()}
					echFacts(rec, e, false)
					s.record(rec)
					return
				}
				// A client that asked in 0-RTT and closed before its
				// Finished came (a one-request load, done once its answer
				// came with our first flight, closes at once; on a busy
				// machine before it sends the Finished) was served: its
				// record says so. Other aborts are not recorded.
				if !c.ConnectionState().Used0RTT {
					return
				}
				unfinished = true
			}
		}
		if lag := recordLag.Load(); lag > 0 { // tests of Settle
			time.Sleep(time.Duration(lag))
		}
		info := connInfo(c)
		handshake := ms(time.Since(info.start))
		cs := c.ConnectionState()
		e := info.ech.Load()
		if e != nil && !cs.TLS.ECHAccepted {
			e.wait(c.Context().Done(), func() bool { return isECHRequired(context.Cause(c.Context())) })
		}
		rec := &Record{Kind: "conn", Transport: transport, Listener: name, Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String(),
			Used0RTT: cs.Used0RTT, Retry: info.retry, AddrVerified: info.verified, TokenUsed: info.tokenUsed,
			HandshakeMs: handshake, Began: info.start, Origins: origins}
		tlsFacts(rec, cs.TLS)
		echFacts(rec, e, cs.TLS.ECHAccepted)
		if rec.ECH == ech.Rejected { // the handshake ended, then the client aborted
			rec.Error = context.Cause(c.Context()).Error()
		}
		if unfinished {
			rec.HandshakeMs, rec.Unfinished = 0, true
			if cause := context.Cause(c.Context()); !closedClean(cause) {
				rec.Error = cause.Error()
			}
		}
		s.record(rec)
	}()
}

// closedClean says whether a connection ended by its client's close
// without an error: DoQ's DOQ_NO_ERROR (0) or HTTP/3's H3_NO_ERROR (a
// client may close an HTTP/3 connection with 0 too), or an application
// close sent before the handshake completed, which QUIC sends as a
// transport APPLICATION_ERROR with the application's code hidden (RFC
// 9000 §10.2.3): the client's application chose to close.
func closedClean(cause error) bool {
	var ae *quic.ApplicationError
	var te *quic.TransportError
	switch {
	case errors.As(cause, &ae):
		return ae.Remote && (ae.ErrorCode == 0 || ae.ErrorCode == h3NoError)
	case errors.As(cause, &te):
		return te.Remote && te.ErrorCode == quic.ApplicationErrorErrorCode
	}
	return false
}

// recordLag holds conn records back in tests, as a busy machine would.
var recordLag atomic.Int64

// pendingConns are the connections whose conn record is not written
// yet, each with a channel closed once it is, and done, which says
// whether its handshake has completed (the record is then on its way).
type pendingConns struct {
	mu sync.Mutex
	m  map[any]*pendingConn
}

type pendingConn struct {
	written chan struct{}
	done    func() bool // active.Load unless the caller can tell
	active  atomic.Bool
}

// activate notes that c, a TLS connection over TCP, carries requests.
func (p *pendingConns) activate(c any) {
	p.mu.Lock()
	if pc := p.m[c]; pc != nil {
		pc.active.Store(true)
	}
	p.mu.Unlock()
}

// add makes c pending; done says whether its handshake has completed,
// nil for a connection that is told so by activate.
func (p *pendingConns) add(c any, done func() bool) *pendingConn {
	pc := &pendingConn{written: make(chan struct{}), done: done}
	if done == nil {
		pc.done = pc.active.Load
	}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[any]*pendingConn{}
	}
	p.m[c] = pc
	p.mu.Unlock()
	return pc
}

func (p *pendingConns) remove(c any, pc *pendingConn) {
	p.mu.Lock()
	delete(p.m, c)
	p.mu.Unlock()
	close(pc.written)
}

// handshaken are the channels of the pending connections whose handshake
// has already completed: their records are on their way.
func (p *pendingConns) handshaken() (out []chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.m {
		if pc.done() {
			out = append(out, pc.written)
		}
	}
	return out
}

// Settle returns once the record of every connection whose handshake
// has completed (or, over QUIC, that has ended) by now is written, or when ctx ends. A measurement that
// takes the server's records right after a load calls it, so a
// connection the load used is never missed because its record's
// goroutine had not run yet (on a busy machine it may wait tens of
// milliseconds; one that offered ECH and sent nothing yet, up to
// echWait). A TLS connection over TCP counts as handshaken once
// net/http saw its first request (crypto/tls cannot say so without
// blocking): a client that got an answer on it is covered.
func (s *Server) Settle(ctx context.Context) {
	for _, ch := range s.pending.handshaken() {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// quicFacts fills a query record from its connection.
func quicFacts(rec *Record, c *quic.Conn) {
	info := connInfo(c)
	st := info.state(c)
	tlsFacts(rec, st.tls)
	rec.Used0RTT, rec.Retry, rec.AddrVerified, rec.TokenUsed = st.used0RTT, info.retry, info.verified, info.tokenUsed
	rec.EarlyData = !handshakeDone(c)
}

// handshakeDone reports whether c's handshake has completed by now.
func handshakeDone(c *quic.Conn) bool {
	select {
	case <-c.HandshakeComplete():
		return true
	default:
		return false
	}
}

// The HTTP/3 error codes the web and DoH/3 listeners close with (RFC 9114
// §8.1).
const (
	h3NoError          quic.ApplicationErrorCode = 0x100
	h3InternalError    quic.ApplicationErrorCode = 0x102
	h3ExcessiveLoad    quic.ApplicationErrorCode = 0x107
	h3RequestCancelled quic.ApplicationErrorCode = 0x10c
	h3MessageError     quic.ApplicationErrorCode = 0x10e
)

// maxUniStreams is the most unidirectional streams a QUIC client may
// have open at once.
const maxUniStreams = 16

// quicListener admits a QUIC listener's connections through a pool (see
// pool): a refused one is closed with refuse, an idle one closed to make
// room with evict.
type quicListener struct {
	*quic.EarlyListener
	s                    *Server
	name, transport      string
	conns                *pool
	refuseCode, idleCode quic.ApplicationErrorCode
	slots                sync.Map // *quic.Conn -> *slot
}

func (s *Server) limitQUIC(ln *quic.EarlyListener, name, transport string, refuse, idle quic.ApplicationErrorCode) *quicListener {
	lim := s.cfg.Limits
	return &quicListener{EarlyListener: ln, s: s, name: name, transport: transport,
		conns: newPool(lim.MaxConns, lim.MaxConnsPerSource, lim.StallTimeout), refuseCode: refuse, idleCode: idle}
}

// Accept returns the next connection the pool admits.
func (l *quicListener) Accept(ctx context.Context) (*quic.Conn, error) {
	for {
		c, err := l.EarlyListener.Accept(ctx)
		if err != nil {
			return nil, err
		}
		sl := l.s.admit(l.conns, l.name, l.transport, c.RemoteAddr(), func() {
			c.CloseWithError(l.idleCode, "idle connection closed at the connection limit")
		})
		if sl == nil {
			c.CloseWithError(l.refuseCode, "too many connections")
			continue
		}
		l.slots.Store(c, sl)
		go func() {
			<-c.Context().Done()
			sl.release()
			l.slots.Delete(c)
			if !handshakeDone(c) {
				l.s.refuse(l.name, l.transport, c.RemoteAddr(), ReasonHandshake, fmt.Sprint(context.Cause(c.Context())))
			}
		}()
		return c, nil
	}
}

// slot is the pool's slot of an admitted connection, or nil.
func (l *quicListener) slot(c *quic.Conn) *slot {
	if sl, ok := l.slots.Load(c); ok {
		return sl.(*slot)
	}
	return nil
}

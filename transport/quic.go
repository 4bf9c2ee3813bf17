package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// quicConn is one QUIC connection with its own connected UDP socket, so
// that bytes and datagrams counted on the socket belong to it alone.
type quicConn struct {
	conn *quic.Conn
	tr   *quic.Transport
	udp  *net.UDPConn
	m    *meter
	w    *wireClock // kernel timestamps; nil without
	obs  *quicObserver

	echOffered bool      // the handshake offered Options.ECHConfigList
	early      bool      // the dial returned before the handshake: 0-RTT keys were there
	dialed     time.Time // socket ready, QUIC dial started
	hsDone     chan struct{}
	hsMu       sync.Mutex
	hsAt       time.Time // when the handshake was first seen complete
	socketMs   float64
	ticketMark uint64
}

// quicObserver learns from quic-go's qlog events what no API exposes:
// whether a Retry or a Version Negotiation happened. It passes every event
// on to the qlog file when one is written.
type quicObserver struct {
	retry, vn, token atomic.Bool
	// earlyRequest: a 0-RTT packet carried request data, i.e. a STREAM
	// frame on a client-initiated bidirectional stream. Dialling early is
	// no proof: on a fast link the handshake may end before the query is
	// written, and it then leaves in 1-RTT packets.
	earlyRequest atomic.Bool
}

type observedTrace struct {
	o     *quicObserver
	inner qlogwriter.Trace
}

func (t *observedTrace) AddProducer() qlogwriter.Recorder {
	r := &observedRecorder{o: t.o}
	if t.inner != nil {
		r.inner = t.inner.AddProducer()
	}
	return r
}

type observedRecorder struct {
	o     *quicObserver
	inner qlogwriter.Recorder
}

func (r *observedRecorder) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketReceived:
		if e.Header.PacketType == qlog.PacketTypeRetry {
			r.o.retry.Store(true)
		}
	case qlog.VersionNegotiationReceived:
		r.o.vn.Store(true)
	case qlog.PacketSent:
		if e.Header.PacketType == qlog.PacketType0RTT && !r.o.earlyRequest.Load() {
			for _, f := range e.Frames {
				if sf, ok := f.Frame.(*qlog.StreamFrame); ok && sf.StreamID%4 == 0 {
					r.o.earlyRequest.Store(true)
				}
			}
		}
	}
	if r.inner != nil {
		r.inner.RecordEvent(ev)
	}
}

func (r *observedRecorder) Close() error {
	if r.inner != nil {
		return r.inner.Close()
	}
	return nil
}

// tokenRecorder notes whether the dial took a NEW_TOKEN token from the store.
type tokenRecorder struct {
	quic.TokenStore
	used *atomic.Bool
}

func (t tokenRecorder) Pop(key string) *quic.ClientToken {
	tok := t.TokenStore.Pop(key)
	if tok != nil {
		t.used.Store(true)
	}
	return tok
}

// bufferedFile flushes before it closes, for qlog files.
type bufferedFile struct {
	*bufio.Writer
	f *os.File
}

func (b bufferedFile) Close() error {
	err := b.Flush()
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (b *base) qlogDir() string {
	if b.opts.QlogDir != "" {
		return b.opts.QlogDir
	}
	return os.Getenv("QLOGDIR")
}

func (b *base) tracer(o *quicObserver) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	dir := b.qlogDir()
	return func(_ context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
		t := &observedTrace{o: o}
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err == nil {
				name := filepath.Join(dir, fmt.Sprintf("%s_%s_client.sqlog", time.Now().UTC().Format("20060102T150405.000000"), id))
				if f, err := os.Create(name); err == nil {
					fs := qlogwriter.NewConnectionFileSeq(bufferedFile{bufio.NewWriter(f), f}, isClient, id)
					go fs.Run()
					t.inner = fs
				}
			}
		}
		return t
	}
}

// dialQUIC opens a QUIC connection for the given ALPNs. With ZeroRTT it
// dials early: when the session holds a ticket allowing 0-RTT, it returns
// before the handshake and the first request rides in 0-RTT packets.
func (b *base) dialQUIC(ctx context.Context, alpn []string, family string, early bool) (*quicConn, error) {
	addr, err := b.serverAddr(ctx)
	if err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	var laddr *net.UDPAddr
	if b.opts.LocalAddr != "" {
		la, _ := localAddr(b.opts.LocalAddr)
		laddr = la(ProtoDoQ).(*net.UDPAddr)
	}
	t0 := time.Now()
	var udp *net.UDPConn
	err = b.openSocket(func() (err error) {
		udp, err = net.DialUDP("udp", laddr, raddr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening UDP socket to %s: %w", addr, err)
	}
	qc := &quicConn{udp: udp, m: &meter{}, obs: &quicObserver{}, hsDone: make(chan struct{})}
	qc.dialed = time.Now()
	qc.socketMs = ms(qc.dialed.Sub(t0))
	mpc := newMeteredPacketConn(udp, qc.m)
	qc.w = mpc.w
	qc.tr = &quic.Transport{Conn: mpc}

	tlsConf := b.tlsConfig(alpn, b.opts.Session.ticketView(family))
	tlsConf.MinVersion = tls.VersionTLS13 // RFC 9001 §4.2
	qc.ticketMark = b.opts.Session.ticketMark(family, tlsConf.ServerName)
	conf := &quic.Config{
		Versions:             b.opts.QUICVersions,
		HandshakeIdleTimeout: b.opts.Timeout,
		MaxIdleTimeout:       30 * time.Second,
		Tracer:               b.tracer(qc.obs),
	}
	if len(conf.Versions) == 0 {
		conf.Versions = []quic.Version{quic.Version1, quic.Version2}
	}
	if v, ok := b.opts.Session.version(addr); ok {
		conf.Versions = []quic.Version{v}
	}
	if s := b.opts.Session; s != nil && s.tokens != nil {
		conf.TokenStore = tokenRecorder{TokenStore: s.tokens, used: &qc.obs.token}
	}
	dial := qc.tr.Dial
	if early {
		dial = qc.tr.DialEarly
	}
	conn, err := dial(ctx, raddr, tlsConf, conf)
	if err != nil {
		de := &dialError{err: fmt.Errorf("QUIC handshake with %s: %w", addr, err)}
		b.echFacts(&de.conn, tls.ConnectionState{}, err)
		de.conn.LocalAddr, de.conn.RemoteAddr = udp.LocalAddr().String(), raddr.String()
		de.conn.Retry, de.conn.VersionNeg, de.conn.TokenUsed = qc.obs.retry.Load(), qc.obs.vn.Load(), qc.obs.token.Load()
		qc.tr.Close()
		udp.Close()
		u := qc.m.snap()
		de.bytes, de.pkts = u.bytes, u.pkts
		return nil, de
	}
	qc.conn, qc.echOffered = conn, len(tlsConf.EncryptedClientHelloConfigList) > 0
	select {
	case <-conn.HandshakeComplete():
		qc.handshakeSeen()
		close(qc.hsDone)
	default:
		qc.early = true
		go qc.watchHandshake(conn)
	}
	b.opts.Session.learnVersion(addr, conn.ConnectionState().Version)
	return qc, nil
}

// watchHandshake waits on the connection it was given, not qc.conn,
// which next replaces after a rejected 0-RTT.
func (qc *quicConn) watchHandshake(c *quic.Conn) {
	select {
	case <-c.HandshakeComplete():
		qc.handshakeSeen()
	case <-c.Context().Done():
	}
	close(qc.hsDone)
}

// handshakeSeen records the handshake's end the first time any goroutine
// sees it, so a query resent after a rejected 0-RTT never seems to precede it.
func (qc *quicConn) handshakeSeen() {
	qc.hsMu.Lock()
	if qc.hsAt.IsZero() {
		qc.hsAt = time.Now()
	}
	qc.hsMu.Unlock()
}

func (qc *quicConn) handshakeAt() time.Time {
	qc.hsMu.Lock()
	defer qc.hsMu.Unlock()
	return qc.hsAt
}

// next replaces a connection whose 0-RTT data the server rejected with
// its continuation; quic-go does not resend 0-RTT data by itself.
func (qc *quicConn) next(ctx context.Context) error {
	n, err := qc.conn.NextConnection(ctx)
	if err != nil {
		return fmt.Errorf("continuing after rejected 0-RTT: %w", err)
	}
	qc.handshakeSeen() // NextConnection returns once the handshake is complete
	qc.conn = n
	return nil
}

func (qc *quicConn) alive() bool { return qc.conn.Context().Err() == nil }

// label fills the record with the connection's facts and, for the exchange
// that opened it, the handshake timings. It waits briefly for the
// handshake when the query went out in 0-RTT, to learn whether the server
// accepted it; the exchange is already timed.
func (qc *quicConn) label(ctx context.Context, x *exch, reused, rejected bool) {
	if !reused {
		select {
		case <-qc.hsDone:
		case <-ctx.Done():
		}
	}
	cs := qc.conn.ConnectionState()
	ci := &x.rec.Conn
	copyTLSFacts(ci, cs.TLS)
	echFacts(ci, qc.echOffered, cs.TLS, nil)
	ci.Reused = reused
	ci.LocalAddr, ci.RemoteAddr = qc.conn.LocalAddr().String(), qc.conn.RemoteAddr().String()
	ci.QUICVersion = cs.Version.String()
	ci.Retry, ci.VersionNeg, ci.TokenUsed = qc.obs.retry.Load(), qc.obs.vn.Load(), qc.obs.token.Load()
	if !reused {
		ci.Attempted0RTT = qc.early && qc.obs.earlyRequest.Load() || rejected
		ci.Used0RTT = cs.Used0RTT
		ci.Rejected0RTT = rejected
		x.rec.Timing.SocketMs = qc.socketMs
		if hs := qc.handshakeAt(); !hs.IsZero() {
			x.rec.Timing.HandshakeMs = ms(hs.Sub(qc.dialed))
		}
	}
}

// close ends a connection kept for one exchange, after giving a session
// ticket a moment to arrive so that the next connection can resume.
func (qc *quicConn) close(s *Session, family, serverName string, code quic.ApplicationErrorCode) {
	s.waitTicket(context.Background(), family, serverName, qc.ticketMark, ticketGrace)
	qc.conn.CloseWithError(code, "")
	qc.tr.Close()
	qc.udp.Close()
}

// rejected0RTT reports whether err came from the server refusing early
// data. The error itself says so even when the handshake, and with it the
// rejection, completed before DialEarly returned (qc.early is then false,
// yet no stream opens until next). HTTP/3 can also report it as a failed
// stream, so the early connection's close cause is the other sign.
func (qc *quicConn) rejected0RTT(err error) bool {
	if errors.Is(err, quic.Err0RTTRejected) {
		return true
	}
	if err == nil || !qc.early {
		return false
	}
	// The connection closes with the rejection as its cause once quic-go
	// has processed the server's reply, which can lag the failed request
	// on a loaded machine (seen beyond 50 ms under -race in CI). Only an
	// early connection's other errors wait this long.
	select {
	case <-qc.conn.Context().Done():
		return errors.Is(context.Cause(qc.conn.Context()), quic.Err0RTTRejected)
	case <-time.After(500 * time.Millisecond):
		return false
	}
}

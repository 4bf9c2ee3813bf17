package pageload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/printable"
	"github.com/doxlab/doxlab/transport"
)

// originConn is one connection, shared by its origins' requests.
type originConn struct {
	rt      http.RoundTripper
	qc      *quic.Conn          // HTTP/3 only
	echList []byte              // the ECHConfigList it was opened with
	echOK   bool                // the server accepted the connection's ECH
	cc      *http3.ClientConn   // HTTP/3 only
	name    string              // the server name its certificate was checked for
	certs   []*x509.Certificate // HTTP/2's, from its handshake
	remote  netip.AddrPort
	nmu     sync.Mutex
	next    *originConn // what replaced it after the server rejected its 0-RTT (successor)
	index   int         // in the load's Conns; -1 before one was begun
	early   bool        // 0-RTT: requests may go before the handshake completes
	// offered: the handshake offered 0-RTT (dialled early with a ticket
	// that allows it), though it may have ended before the dial returned.
	offered bool
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
		c.next = ld.open(ctx, c.name, origin, c.remote, "h3", false, c.echList)
	}
	return c.next
}

// rejected says whether err, from a request or lookup on c, is the
// server's rejection of c's 0-RTT: Err0RTTRejected, or any failure of a
// connection whose 0-RTT the handshake turned down. quic-go's HTTP/3
// closes such a connection with H3_INTERNAL_ERROR once its control
// stream's 0-RTT write is lost, so a request that waited on it may see
// that instead; and when its control stream is opened only after the
// server's EncryptedExtensions said no (a late goroutine on a busy
// machine), that close comes before the handshake completes.
func (c *originConn) rejected(err error) bool {
	if err == nil || c.qc == nil {
		return false
	}
	if errors.Is(err, quic.Err0RTTRejected) {
		return true
	}
	if !c.offered {
		return false
	}
	// A request that failed on the control stream's loss says so itself,
	// whatever the handshake's state when it is asked.
	if lostControlStream(err) {
		return true
	}
	if handshakeDone(c.qc) {
		return !c.qc.ConnectionState().Used0RTT
	}
	return lostControlStream(context.Cause(c.qc.Context()))
}

// lostControlStream says whether a connection ended as quic-go's HTTP/3
// client ends one whose control stream could not be opened or written:
// closed on this side with H3_INTERNAL_ERROR, the one place it uses it.
func lostControlStream(cause error) bool {
	ae, ok := errors.AsType[*quic.ApplicationError](cause)
	return ok && !ae.Remote && ae.ErrorCode == quic.ApplicationErrorCode(http3.ErrCodeInternalError)
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
	lo, err := ld.resolve(ctx, host)
	if err == nil {
		lo.addrs, err = ld.reachable(host, lo.addrs)
	}
	if err != nil {
		return &originConn{index: -1, err: err}
	}
	h3 := lo.h3
	remote := netip.AddrPortFrom(lo.addrs[0], uint16(ld.l.cfg.Port))
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
	return ld.open(ctx, host, origin, remote, proto, ld.l.cfg.ZeroRTT, lo.ech)
}

// reachable is what of host's addresses the page may connect to. An
// address in a special-purpose block (loopback, link-local and cloud
// metadata, private networks, ...) is refused, as Chromium's Private
// Network Access keeps a public page from the machine's and its
// network's own services, unless the block is the page's own or the
// loader's AllowSpecial allows it: a page's subresource, or a measured
// resolver's answer for one, once sent doxlab's loader from a public
// page to 169.254.169.254. The document's first address places the page
// (its block is then the page's own, 127.0.0.0/8 for a page on
// loopback), but it too must be allowed, or named by the page's URL
// itself: a resolver's answer for the page's name, or a later one that
// rebinds it, is no more trusted than any other.
func (ld *load) reachable(host string, addrs []netip.Addr) ([]netip.Addr, error) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	placing := host == ld.docHost && !ld.docPlaced
	var ok []netip.Addr
	var refused error
	for _, a := range addrs {
		s, special := blocklist.SpecialOf(a)
		switch {
		case !special, ld.docPlaced && s.Prefix == ld.docBlock, ld.allow.Allowed(a),
			placing && a.Unmap().WithZone("") == ld.docLiteral:
			ok = append(ok, a)
		case refused != nil:
		case placing:
			refused = fmt.Errorf("%w: the page's host %s is at %s, in %s (%s): a page is loaded from such an address only where the loader allows its block, or its URL names the address",
				blocklist.ErrSpecial, host, a, s.Prefix, s.Name)
		default:
			refused = fmt.Errorf("%w: %s is at %s, in %s (%s), and the page is not: a page reaches such addresses only from within their block",
				blocklist.ErrSpecial, host, a, s.Prefix, s.Name)
		}
	}
	if len(ok) == 0 && refused != nil {
		return nil, refused
	}
	if placing && len(ok) > 0 {
		ld.docPlaced = true
		if s, special := blocklist.SpecialOf(ok[0]); special {
			ld.docBlock = s.Prefix
		}
	}
	return ok, nil
}

// open opens a connection to remote for origin, its certificate checked
// for name; over HTTP/3 in 0-RTT if early and the session allows; with
// the ECHConfigList of the host's HTTPS record, if any.
func (ld *load) open(ctx context.Context, name, origin string, remote netip.AddrPort, proto string, early bool, echList []byte) *originConn {
	c := &originConn{index: -1, name: name, remote: remote, echList: echList}
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
	dial := func() error {
		if proto == "h3" {
			return ld.dialH3(ctx, c, info, remote, tlsConf, early)
		}
		return ld.dialH2(ctx, c, info, remote, tlsConf)
	}
	if len(echList) > 0 && !ld.l.cfg.NoECH {
		// ECH from the host's HTTPS record, as browsers use it: a config
		// the server no longer holds is rejected after a handshake under
		// the public name, and the retry configs it sent are used on a
		// new connection (RFC 9849 §6.1.6), a round trip later. With
		// 0-RTT the rejection surfaces at the handshake's end: the dial
		// waits for it.
		tlsConf.EncryptedClientHelloConfigList = echList
		tlsConf.MinVersion = tls.VersionTLS13
		info.ECH = "offered"
		early = false
		c.err = dial()
		if rej, ok := errors.AsType[*tls.ECHRejectionError](c.err); ok && len(rej.RetryConfigList) > 0 {
			tlsConf.EncryptedClientHelloConfigList = rej.RetryConfigList
			info.ECHRetried = true
			c.err = dial()
		}
		if c.err == nil && c.echOK {
			info.ECH = ech.Accepted
			if info.ECHRetried {
				info.ECH = ech.Retried
			}
		}
	} else {
		c.err = dial()
	}
	if c.err != nil {
		info.Error = printable.String(c.err.Error())
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
	// A handshake that ended before the dial returned (a late goroutine on
	// a busy machine) still offered the 0-RTT its server may have turned
	// down: the connection is then lost to HTTP/3 as one rejected later.
	c.offered = early && tokens.EarlyTicket()
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
		c.echOK = qc.ConnectionState().TLS.ECHAccepted
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
	c.echOK = tc.ConnectionState().ECHAccepted
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

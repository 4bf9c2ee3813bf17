// Package transport is the client side of every DNS transport doxlab
// measures: DNS over UDP and TCP, DoT (RFC 7858), DoH over HTTP/1.1, /2 and
// /3 (RFC 8484) and DoQ (RFC 9250), chosen by URL scheme.
//
// Every exchange returns a Record with its status, per-phase timings from
// the monotonic clock, connection facts (reused, resumed, 0-RTT, Retry,
// versions, ALPN) and byte and packet counts taken at the socket, so that a
// measurement says what actually happened rather than what was asked for.
// The examples (example_test.go) run against doxlab's own server.
package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/printable"
)

// Transport sends DNS queries over one protocol to one server.
type Transport interface {
	// Exchange sends q and waits for its answer. The record is never nil:
	// on failure its Status and Error say why, and err is non-nil.
	// An answer with a non-zero rcode is not an error.
	Exchange(ctx context.Context, q *dns.Msg) (*Record, error)
	// Close closes any connection kept for reuse.
	Close() error
}

// Options configure a transport. The zero value measures the papers'
// default: a fresh connection per query, full handshakes, certificates
// verified, a 5 s timeout.
type Options struct {
	// Timeout bounds one exchange, handshakes included. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Reuse keeps one connection open and sends every query over it:
	// pipelined with answers matched by ID on UDP, TCP and DoT, pipelined
	// GETs on HTTP/1.1 (POST and JSON go one at a time); multiplexed on
	// HTTP/2 and HTTP/3; one stream per query on DoQ.
	Reuse bool
	// Session is the state shared between connections (and between the
	// transports of one client): TLS tickets, QUIC tokens, QUIC versions.
	// Nil means every connection starts from nothing.
	Session *Session
	// ZeroRTT sends DoQ queries and DoH/3 GETs as 0-RTT early data when the
	// session holds a ticket that allows it. A rejected attempt is resent
	// after the handshake and reported as rejected.
	ZeroRTT bool
	// Padding pads queries with EDNS(0) (RFC 7830) to blocks of 128 octets,
	// the policy RFC 8467 recommends for clients.
	Padding bool
	// HTTPVersion for https:// URLs: "1.1", "2" (default) or "3".
	HTTPVersion string
	// Method for DoH: "get" (default, the only one allowed as 0-RTT) or "post".
	Method string
	// JSON uses the JSON API (application/dns-json) instead of RFC 8484.
	JSON bool
	// SNI overrides the server name sent and verified. Empty means the URL's host.
	SNI string
	// RootCAs verifies the server's certificate. Nil means the system roots.
	RootCAs *x509.CertPool
	// Insecure skips certificate verification.
	Insecure bool
	// LocalAddr binds the socket, as "ip:port", ":port" or "ip". Empty means any.
	LocalAddr string
	// QUICVersions are offered in order. Nil means QUIC v1, then v2.
	QUICVersions []quic.Version
	// DoQALPNs are offered for DoQ, in order. Nil means just "doq";
	// DraftDoQALPNs adds the drafts for old servers.
	DoQALPNs []string
	// QlogDir receives one qlog file per QUIC connection. Empty means the
	// QLOGDIR environment variable, if set.
	QlogDir string
	// KeyShares are the TLS key exchanges offered, first one's key share
	// sent. Nil means Go's default, whose post-quantum X25519MLKEM768 share
	// makes the QUIC ClientHello span two Initial datagrams; X25519 alone
	// fits one, as the papers' clients did.
	KeyShares []tls.CurveID
	// OpenSockets, if set, is called around every socket the transport
	// opens, also those net/http opens on its own goroutines: the testbed's
	// Run passes it to open them inside a host's network namespace.
	OpenSockets func(open func() error) error `json:"-"`
	// Refuse, if set, is asked about the server's address (a host name's
	// once resolved) before any socket is opened; an error refuses the
	// exchange with it. A campaign's blocklist and opt-out requests bind
	// here, where host names have become addresses.
	Refuse func(netip.Addr) error `json:"-"`
	// KeyLog receives TLS secrets in NSS key log format. Nil means the file
	// named by SSLKEYLOGFILE, if set.
	KeyLog io.Writer
	// ECHConfigList, if set, is the server's ECH config (ech= of its
	// HTTPS record, RFC 9848): every TLS handshake (DoT, DoH, DoQ, and an
	// ODoH client's to its proxy) offers it, so the network sees the
	// config's public name instead of the server's, and the record says
	// whether the server accepted it (ConnInfo.ECH). A rejection fails the
	// exchange, naming it: what a stale config costs is the measurement,
	// not something to hide behind a retry.
	ECHConfigList []byte `json:"-"`
}

// DraftDoQALPNs are the ALPNs of the DoQ drafts, newest first.
var DraftDoQALPNs = []string{"doq-i11", "doq-i10", "doq-i09", "doq-i08", "doq-i07", "doq-i06", "doq-i05", "doq-i04", "doq-i03", "doq-i02", "doq-i01", "doq-i00"}

// DefaultTimeout bounds an exchange whose Options give no Timeout.
const DefaultTimeout = 5 * time.Second

// endpointOf is rawURL's endpoint as New speaks to it: an https:// URL's
// protocol is DoH over the HTTP version opts ask.
func endpointOf(rawURL string, opts Options) (*Endpoint, error) {
	ep, err := ParseURL(rawURL)
	if err != nil || ep.Scheme != "https" {
		return ep, err
	}
	switch opts.HTTPVersion {
	case "", "2":
	case "1.1", "1":
		ep.Protocol = ProtoDoH1
	case "3":
		ep.Protocol = ProtoDoH3
	default:
		return nil, fmt.Errorf("unknown HTTP version %q (want 1.1, 2 or 3)", opts.HTTPVersion)
	}
	return ep, nil
}

// ProtocolOf is the protocol New's transport for rawURL and opts speaks,
// as its records name it (udp, dot, doh2, doq, ...): what to call a run
// none of whose queries was answered.
func ProtocolOf(rawURL string, opts Options) (string, error) {
	ep, err := endpointOf(rawURL, opts)
	if err != nil {
		return "", err
	}
	return ep.Protocol, nil
}

// New returns the transport for rawURL: udp://, tcp://, tls://, https://,
// h3:// or quic://.
func New(rawURL string, opts Options) (Transport, error) {
	ep, err := endpointOf(rawURL, opts)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	switch opts.Method {
	case "", "get", "GET", "post", "POST":
	default:
		return nil, fmt.Errorf("unknown DoH method %q (want get or post)", opts.Method)
	}
	if opts.LocalAddr != "" {
		if _, err := localAddr(opts.LocalAddr); err != nil {
			return nil, err
		}
	}
	b := &base{ep: ep, opts: opts}
	if ep.Protocol == ProtoODoH {
		b.obl = &oblivious{host: ep.Target, path: ep.TargetPath, roots: b.tlsClientConfig, open: b.openSocket, refuse: opts.Refuse, timeout: opts.Timeout}
		switch opts.HTTPVersion {
		case "3":
			return newDoH3(b), nil
		case "1.1", "1":
			t := newDoH(b)
			t.alpn = "http/1.1"
			return t, nil
		}
		return newDoH(b), nil
	}
	switch ep.Protocol {
	case ProtoUDP:
		return &udpTransport{base: b}, nil
	case ProtoTCP, ProtoDoT:
		return &streamTransport{base: b}, nil
	case ProtoDoH1, ProtoDoH2:
		if ep.Protocol == ProtoDoH1 && opts.Reuse && !opts.JSON && strings.ToUpper(orDefault(opts.Method, "get")) == "GET" {
			return &streamTransport{base: b}, nil // pipelined
		}
		return newDoH(b), nil
	case ProtoDoH3:
		return newDoH3(b), nil
	case ProtoDoQ:
		return newDoQ(b), nil
	}
	return nil, fmt.Errorf("unsupported protocol %q", ep.Protocol)
}

// base is what every transport shares: where to send, how, and the
// skeleton of one exchange.
type base struct {
	ep   *Endpoint
	opts Options
	obl  *oblivious // DoH sealed to an ODoH target, through ep's proxy

	addrOnce resolvedAddr
}

// exch carries one exchange's timestamps from the protocol code to run.
type exch struct {
	rec       *Record
	start     time.Time
	querySent time.Time // first query byte written at the socket
	answered  time.Time // full response read at the socket
	// answerFirst is when the response's first octet arrived, where the
	// transport knows it (TCP, DoT, DoH over TCP).
	answerFirst time.Time
	// The kernel's timestamps (wireClock): the exchange's first packet
	// out, the query's, and the answer's last packet in.
	wireStart, wireQuery, wireIn time.Time
	odoh                         *odohState // an ODoH exchange's sealed query
	odohConfigErr                error      // fetching the ODoH target's config failed, before the exchange
}

// wireFrom takes the exchange's kernel timestamps from its connection's
// clock: a reused connection's exchange starts with its query.
func (x *exch) wireFrom(w *wireClock, reused bool, query time.Time) {
	first, armed, in := w.times(x.answered)
	if query.IsZero() {
		query = armed
	}
	x.wireStart, x.wireQuery, x.wireIn = first, query, in
	if reused {
		x.wireStart = query
	}
}

// stallSpread is the least time between an answer's first and last octet
// that says its tail was held back: a DNS answer is written at once, so
// only the server's kernel holds part of it, Nagle's algorithm waiting
// for the ACK the client delays (40 ms on Linux, up to 200 ms).
const stallSpread = 30 * time.Millisecond

// dialError is a dial that failed after traffic flowed (a TLS or QUIC
// handshake, a Version Negotiation): it keeps what the connection showed,
// so that the record says what happened, not only that it failed.
type dialError struct {
	err         error
	conn        ConnInfo // addresses, and the TLS and QUIC facts so far
	bytes, pkts Counts
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// run is the skeleton of every exchange: copy and pad the query, bound it
// by the timeout, let the protocol do the round trip, check the answer
// against the question and label the record.
func (b *base) run(ctx context.Context, q *dns.Msg, do func(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error)) (*Record, error) {
	start := time.Now()
	rec := &Record{
		URL: b.ep.URL, Protocol: b.ep.Protocol, Server: b.ep.HostPort(),
		Start: start, Answers: []string{},
	}
	if len(q.Question) > 0 {
		rec.QName = q.Question[0].Name
		rec.QType = dns.TypeToString[q.Question[0].Qtype]
	}
	q = q.Copy()
	if b.opts.Padding {
		pad(q)
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	x := &exch{rec: rec, start: start}
	resp, err := do(ctx, x, q)
	end := time.Now()
	if err == nil {
		err = CheckAnswer(q, resp)
	}
	if !x.answered.IsZero() {
		end = x.answered
	}
	if !x.answerFirst.IsZero() && !x.answered.IsZero() && x.answered.After(x.answerFirst) {
		spread := x.answered.Sub(x.answerFirst)
		rec.Timing.AnswerSpreadMs = ms(spread)
		rec.Conn.DelayedACKStall = spread >= stallSpread
	}
	if !x.wireStart.IsZero() && x.wireIn.After(x.wireStart) {
		rec.WireStart = x.wireStart
		rec.Timing.WireMs = ms(x.wireIn.Sub(x.wireStart))
		if !x.wireQuery.IsZero() && x.wireIn.After(x.wireQuery) {
			rec.Timing.WireQueryMs = ms(x.wireIn.Sub(x.wireQuery))
		}
	}
	if !x.querySent.IsZero() {
		rec.Timing.QueryStartMs = ms(x.querySent.Sub(start))
		if !x.answered.IsZero() {
			rec.Timing.QueryMs = ms(x.answered.Sub(x.querySent))
		}
	}
	rec.Timing.TotalMs = ms(end.Sub(start))
	if de, ok := errors.AsType[*dialError](err); ok {
		rec.Conn, rec.Bytes, rec.Packets = de.conn, de.bytes, de.pkts
	}
	if err != nil {
		// A stream's deadline is the context's, and may fire first: a
		// timeout says which bound it reached either way.
		if st := Classify(err); st == StatusTimeout || (ctx.Err() == context.DeadlineExceeded && st != StatusMalformed) {
			err = fmt.Errorf("no answer within %s: %w", b.opts.Timeout, err)
		}
		err = printableError(err)
		rec.Status, rec.Error = Classify(err), err.Error()
		return rec, err
	}
	rec.fill(resp)
	if resp.Truncated && rec.Protocol == ProtoUDP {
		rec.Status = StatusTruncated
	}
	return rec, nil
}

// CheckAnswer rejects a message that is not the answer to q: a query,
// or an answer to another ID or question, is malformed.
func CheckAnswer(q, r *dns.Msg) error {
	switch {
	case r == nil:
		return malformed("no message")
	case !r.Response:
		return malformed("QR bit not set")
	case r.Id != q.Id:
		return malformed("ID %d does not match query ID %d", r.Id, q.Id)
	}
	if len(r.Question) == 0 {
		// Some servers leave the question out of error answers (RFC 1035 allows it).
		if r.Rcode != dns.RcodeSuccess {
			return nil
		}
		return malformed("answer has no question section")
	}
	if len(q.Question) > 0 {
		a, b := r.Question[0], q.Question[0]
		if dns.CanonicalName(a.Name) != dns.CanonicalName(b.Name) || a.Qtype != b.Qtype || a.Qclass != b.Qclass {
			return malformed("answer is for %s %s, not %s %s", a.Name, dns.TypeToString[a.Qtype], b.Name, dns.TypeToString[b.Qtype])
		}
	}
	return nil
}

// pad adds an EDNS(0) padding option so the query is a multiple of 128
// octets (RFC 8467 §4.1, block-length padding).
func pad(q *dns.Msg) {
	opt := q.IsEdns0()
	if opt == nil {
		q.SetEdns0(1232, false)
		opt = q.IsEdns0()
	}
	for i, o := range opt.Option {
		if o.Option() == dns.EDNS0PADDING {
			opt.Option = append(opt.Option[:i], opt.Option[i+1:]...)
			break
		}
	}
	p := &dns.EDNS0_PADDING{}
	opt.Option = append(opt.Option, p)
	n := q.Len() // includes the 4-octet option header of the empty option
	if rem := n % 128; rem != 0 {
		p.Padding = make([]byte, 128-rem)
	}
}

// target is the https:// URL of a DoH endpoint.
func (b *base) target() string { return "https://" + b.ep.HostPort() + b.ep.Path }

// serverName is the name sent and verified (and the session cache's key).
func (b *base) serverName() string {
	if b.opts.SNI != "" {
		return b.opts.SNI
	}
	return b.ep.Host
}

// tlsClientConfig verifies another server of the exchange (an ODoH
// target) as the transport verifies its own.
func (b *base) tlsClientConfig() *tls.Config {
	return &tls.Config{RootCAs: b.opts.RootCAs, InsecureSkipVerify: b.opts.Insecure, MinVersion: tls.VersionTLS12}
}

// tlsConfig is the client TLS config for one connection.
func (b *base) tlsConfig(alpn []string, cache tls.ClientSessionCache) *tls.Config {
	c := &tls.Config{
		ServerName:         b.serverName(),
		NextProtos:         alpn,
		RootCAs:            b.opts.RootCAs,
		InsecureSkipVerify: b.opts.Insecure,
		ClientSessionCache: cache,
		KeyLogWriter:       KeyLog(b.opts.KeyLog),
		MinVersion:         tls.VersionTLS12,
		CurvePreferences:   b.opts.KeyShares,
	}
	if len(b.opts.ECHConfigList) > 0 {
		c.EncryptedClientHelloConfigList = b.opts.ECHConfigList
		c.MinVersion = tls.VersionTLS13 // ECH is TLS 1.3's
	}
	return c
}

// echFacts records what the connection's ECH came to, when the
// transport offers one.
func (b *base) echFacts(ci *ConnInfo, cs tls.ConnectionState, err error) {
	echFacts(ci, len(b.opts.ECHConfigList) > 0, cs, err)
}

// echFacts records what a connection's ECH came to, when it offered
// one: accepted, or rejected (err, the handshake's, carries the
// server's rejection).
func echFacts(ci *ConnInfo, offered bool, cs tls.ConnectionState, err error) {
	switch {
	case !offered:
	case cs.ECHAccepted:
		ci.ECH = ech.Accepted
	case errors.As(err, new(*tls.ECHRejectionError)):
		ci.ECH = ech.Rejected
	}
}

// openSocket runs open, which creates a socket, where the options say.
func (b *base) openSocket(open func() error) error {
	if b.opts.OpenSockets == nil {
		return open()
	}
	return b.opts.OpenSockets(open)
}

// dialer returns a net.Dialer bound to the configured local address whose
// Control hook records when the socket exists, splitting socket setup from
// the TCP handshake.
func (b *base) dialer(socketReady *time.Time) *net.Dialer {
	d := &net.Dialer{Control: func(string, string, syscall.RawConn) error {
		*socketReady = time.Now()
		return nil
	}}
	if b.opts.LocalAddr != "" {
		la, _ := localAddr(b.opts.LocalAddr)
		d.LocalAddr = la(b.ep.Protocol)
	}
	return d
}

// copyTLSFacts records the facts of a completed TLS handshake.
func copyTLSFacts(ci *ConnInfo, cs tls.ConnectionState) {
	ci.TLSVersion = tlsVersionName(cs.Version)
	ci.Cipher = tls.CipherSuiteName(cs.CipherSuite)
	ci.ALPN = cs.NegotiatedProtocol
	ci.TLSResumed = cs.DidResume
	ci.PeerCertificates = cs.PeerCertificates
}

// tlsVersionName names a TLS version; "" for none (a handshake that
// failed before the version was chosen).
func tlsVersionName(v uint16) string {
	switch v {
	case 0:
		return ""
	case tls.VersionTLS10:
		return "1.0"
	case tls.VersionTLS11:
		return "1.1"
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return fmt.Sprintf("0x%04x", v)
}

// peerError is an error whose text the peer wrote part of (a QUIC
// CONNECTION_CLOSE's reason phrase, a stream reset's or an HTTP/2
// GOAWAY's debug data), with its control characters written as escapes
// (printable.String): a record's error is stored, exported and printed
// on terminals, which would act on a measured server's ESC and BEL.
type peerError struct{ err error }

func (e peerError) Error() string { return printable.String(e.err.Error()) }
func (e peerError) Unwrap() error { return e.err }

// printableError is err, as a peerError where its text has control
// characters.
func printableError(err error) error {
	if strings.ContainsFunc(err.Error(), unicode.IsControl) {
		return peerError{err}
	}
	return err
}

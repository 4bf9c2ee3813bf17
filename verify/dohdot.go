package verify

import (
	"bytes"
	"context"
	"syscall"

	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/odoh"
	"github.com/doxlab/doxlab/transport"
)

// DoT is a DoT candidate's support (RFC 7858).
type DoT struct {
	Target    string `json:"target"`
	Answers   bool   `json:"answers"`       // a query over TLS got an answer
	ALPNDoT   bool   `json:"alpn_dot"`      // the server chose ALPN "dot" when offered
	NoALPN    bool   `json:"no_alpn_ok"`    // it answers a client that offers no ALPN
	Keepalive bool   `json:"tcp_keepalive"` // it answered edns-tcp-keepalive (RFC 7828)
	FastOpen  bool   `json:"tcp_fastopen"`  // a SYN with data was acknowledged (RFC 7413)
	TLS       string `json:"tls_version,omitempty"`
	Error     string `json:"error,omitempty"`
	Cert      *Cert  `json:"certificate,omitempty"`
	TLSFacts
}

// TLSFacts are what the DoH-cost paper's survey checked beyond the
// certificate: timestamps and OCSP stapled in the handshake, and the
// session ticket's lifetime.
type TLSFacts struct {
	SCTsInTLS       int   `json:"ct_scts_in_tls"`
	OCSPStapled     bool  `json:"ocsp_stapled"`
	TicketLifetimeS int64 `json:"ticket_lifetime_s"`
}

// lifetimeCache records the lifetime of the tickets it is given.
type lifetimeCache struct {
	tls.ClientSessionCache
	life time.Duration
}

func (c *lifetimeCache) Put(key string, cs *tls.ClientSessionState) {
	if cs != nil {
		c.life = transport.TicketLifetime(cs)
	}
	c.ClientSessionCache.Put(key, cs)
}

// DoH is a DoH candidate's support: which paths and content types
// answer, over which HTTP versions, and which TLS versions it accepts.
type DoH struct {
	Target string `json:"target"` // ip:port
	// Endpoints that answered, as "PATH MIME METHOD", over HTTP/2.
	Endpoints   []string `json:"endpoints,omitempty"`
	HTTP11      bool     `json:"http1.1"`
	HTTP2       bool     `json:"http2"`
	HTTP3       bool     `json:"http3"`
	AltSvc      string   `json:"alt_svc,omitempty"` // the Alt-Svc header, announcing HTTP/3
	TLSVersions []string `json:"tls_versions,omitempty"`
	Error       string   `json:"error,omitempty"`
	Cert        *Cert    `json:"certificate,omitempty"`
	TLSFacts
	// CAA are the CAA records of the certificate's first name, as the
	// resolver itself answers them.
	CAA []string `json:"caa,omitempty"`
	// ODoH is the Oblivious DoH target config it publishes at
	// /.well-known/odohconfigs (RFC 9230), nil when none; ODoHAnswers
	// says whether a query sealed to it, POSTed to the first endpoint's
	// path, was answered.
	ODoH        *ODoHConfig `json:"odoh,omitempty"`
	ODoHAnswers bool        `json:"odoh_answers,omitempty"`
	// ECH is the public name of the ECH config (ech=, RFC 9848) in the
	// HTTPS record of the certificate's first name, as the resolver
	// answers it; "" when it has none.
	ECH string `json:"ech_public_name,omitempty"`
	// ODoHInHTTPS is the ODoH config in that HTTPS record, under the
	// drafts' odohconfig key (odoh.SvcParamKey), nil when none.
	ODoHInHTTPS *ODoHConfig `json:"odoh_in_https,omitempty"`
}

// ODoHConfig is what a target's first usable ODoH config says.
type ODoHConfig struct {
	KEM   uint16 `json:"kem_id"`
	KDF   uint16 `json:"kdf_id"`
	AEAD  uint16 `json:"aead_id"`
	KeyID string `json:"key_id"` // its first 8 octets, hex
}

// DoHPaths are the common endpoints the DoH-cost paper looked for.
var DoHPaths = []string{"/dns-query", "/resolve", "/"}

func query(name string) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	q.RecursionDesired = true
	return q
}

// tlsDial is how one TLS connection is opened.
type tlsDial struct {
	alpn       []string
	minV, maxV uint16                                      // 0: Go's defaults
	cache      tls.ClientSessionCache                      // nil: no tickets kept
	control    func(string, string, syscall.RawConn) error // socket options before connect
}

// dialTLS opens a TCP connection (where o says) and completes a TLS
// handshake over it.
func dialTLS(ctx context.Context, target string, o Options, t tlsDial) (*tls.Conn, error) {
	var raw net.Conn
	err := openIn(o, func() (err error) {
		d := net.Dialer{Timeout: o.Timeout, Control: t.control}
		raw, err = d.DialContext(ctx, "tcp", target)
		return err
	})
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: t.alpn, MinVersion: t.minV, MaxVersion: t.maxV, ClientSessionCache: t.cache})
	hctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := c.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

func openIn(o Options, f func() error) error {
	if o.OpenSockets == nil {
		return f()
	}
	return o.OpenSockets(f)
}

// VerifyDoT checks a DoT candidate.
func VerifyDoT(ctx context.Context, target string, o Options) *DoT {
	o.defaults()
	r := &DoT{Target: target}
	tickets := &lifetimeCache{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	ask := func(alpn []string, keepalive bool) (*tls.Conn, *dns.Msg, error) {
		c, err := dialTLS(ctx, target, o, tlsDial{alpn: alpn, minV: tls.VersionTLS12, cache: tickets})
		if err != nil {
			return nil, nil, err
		}
		q := query(o.Name)
		if keepalive {
			q.SetEdns0(1232, false)
			opt := q.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
		}
		wire, _ := q.Pack()
		buf, _ := dnswire.AppendPrefixed(nil, wire)
		c.SetDeadline(time.Now().Add(o.Timeout))
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return nil, nil, err
		}
		b, err := dnswire.ReadPrefixed(c)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		m, err := dnswire.Unpack(b)
		if err == nil {
			err = transport.CheckAnswer(q, m) // a reply to another query answers nothing
		}
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return c, m, nil
	}
	c, m, err := ask([]string{"dot"}, true)
	if err != nil {
		r.Error = err.Error()
	} else {
		cs := c.ConnectionState()
		r.Answers, r.ALPNDoT = m.Response, cs.NegotiatedProtocol == "dot"
		r.TLS = map[uint16]string{tls.VersionTLS12: "1.2", tls.VersionTLS13: "1.3"}[cs.Version]
		r.Cert = summarize(cs.PeerCertificates)
		r.SCTsInTLS, r.OCSPStapled = len(cs.SignedCertificateTimestamps), len(cs.OCSPResponse) > 0
		r.TicketLifetimeS = int64(tickets.life.Seconds())
		if opt := m.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				r.Keepalive = r.Keepalive || o.Option() == dns.EDNS0TCPKEEPALIVE
			}
		}
		c.Close()
	}
	if c, _, err := ask(nil, false); err == nil {
		r.NoALPN = true
		c.Close()
	}
	if r.Answers {
		r.FastOpen = fastOpen(ctx, target, o)
	}
	return r
}

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "example.com"
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
}

// VerifyDoH checks a DoH candidate (ip:port, normally :443).
func VerifyDoH(ctx context.Context, target string, o Options) *DoH {
	o.defaults()
	r := &DoH{Target: target}
	base := transport.Options{Insecure: true, Timeout: o.Timeout, OpenSockets: o.OpenSockets}
	try := func(path, version, method string, json bool) bool {
		opts := base
		opts.HTTPVersion, opts.Method, opts.JSON = version, method, json
		scheme := "https"
		if version == "3" {
			scheme, opts.HTTPVersion = "h3", ""
		}
		t, err := transport.New(scheme+"://"+target+path, opts)
		if err != nil {
			return false
		}
		defer t.Close()
		_, err = t.Exchange(ctx, query(o.Name))
		return err == nil
	}
	for _, p := range DoHPaths {
		for _, v := range []struct {
			mime, method string
			json         bool
		}{{dnswire.MimeDNS, "get", false}, {dnswire.MimeDNS, "post", false}, {dnswire.MimeJSON, "get", true}} {
			if try(p, "2", v.method, v.json) {
				r.Endpoints = append(r.Endpoints, fmt.Sprintf("%s %s %s", p, v.mime, strings.ToUpper(v.method)))
			}
		}
	}
	// HTTP versions on the first endpoint that answered (or the default).
	path, json, method := "/dns-query", false, "get"
	if len(r.Endpoints) > 0 {
		f := strings.Fields(r.Endpoints[0])
		path, json, method = f[0], f[1] == dnswire.MimeJSON, strings.ToLower(f[2])
	}
	r.HTTP11, r.HTTP2, r.HTTP3 = try(path, "1.1", method, json), try(path, "2", method, json), try(path, "3", method, json)
	r.AltSvc = altSvc(ctx, target, path, o)
	for _, v := range []struct {
		name string
		v    uint16
	}{{"1.0", tls.VersionTLS10}, {"1.1", tls.VersionTLS11}, {"1.2", tls.VersionTLS12}, {"1.3", tls.VersionTLS13}} {
		if c, err := dialTLS(ctx, target, o, tlsDial{alpn: []string{"h2", "http/1.1"}, minV: v.v, maxV: v.v}); err == nil {
			r.TLSVersions = append(r.TLSVersions, v.name)
			cs := c.ConnectionState()
			r.Cert = summarize(cs.PeerCertificates)
			r.SCTsInTLS, r.OCSPStapled = len(cs.SignedCertificateTimestamps), len(cs.OCSPResponse) > 0
			c.Close()
		}
	}
	if r.Cert != nil && len(r.Endpoints) > 0 {
		r.CAA = caa(ctx, target, r, base)
		r.ECH, r.ODoHInHTTPS = ownHTTPS(ctx, target, r, base)
	}
	r.ODoH, r.ODoHAnswers = oblivious(ctx, target, path, o)
	if len(r.Endpoints) == 0 && len(r.TLSVersions) == 0 {
		r.Error = "no TLS and no DoH endpoint"
	}
	return r
}

// httpsTo is an HTTP client transport whose every connection goes to
// target over TLS (HTTP/2 or HTTP/1.1), dialled as the checks dial.
func httpsTo(target string, o Options) *http.Transport {
	return &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialTLS(ctx, target, o, tlsDial{alpn: []string{"h2", "http/1.1"}, minV: tls.VersionTLS12})
		},
		ForceAttemptHTTP2: true,
	}
}

// altSvc reads the Alt-Svc header of a DoH GET over HTTP/2 or HTTP/1.1.
func altSvc(ctx context.Context, target, path string, o Options) string {
	tr := httpsTo(target, o)
	defer tr.CloseIdleConnections()
	wire, _ := query(o.Name).Pack()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+target+path+"?dns="+base64.RawURLEncoding.EncodeToString(wire), nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Accept", dnswire.MimeDNS)
	resp, err := (&http.Client{Transport: tr, Timeout: o.Timeout}).Do(req)
	if err != nil {
		return ""
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) // a body without end is the server's, not the survey's
	resp.Body.Close()
	return resp.Header.Get("Alt-Svc")
}

// caa asks the resolver for the CAA records of its certificate's first
// DNS name, over its own first DoH endpoint.
func caa(ctx context.Context, target string, r *DoH, base transport.Options) []string {
	resp := askOwn(ctx, target, r, base, dns.TypeCAA)
	if resp == nil {
		return nil
	}
	var out []string
	for _, rr := range resp.Answer {
		if c, ok := rr.(*dns.CAA); ok {
			out = append(out, fmt.Sprintf("%d %s %q", c.Flag, c.Tag, c.Value))
		}
	}
	return out
}

// askOwn asks the resolver, over its own first DoH endpoint, for the
// records of type t of its certificate's first DNS name; nil when there
// is no such name or no answer.
func askOwn(ctx context.Context, target string, r *DoH, base transport.Options, t uint16) *dns.Msg {
	var name string
	for _, n := range r.Cert.SANs {
		if net.ParseIP(n) == nil && !strings.HasPrefix(n, "*") {
			name = n
			break
		}
	}
	if name == "" {
		return nil
	}
	f := strings.Fields(r.Endpoints[0])
	opts := base
	opts.JSON, opts.Method = f[1] == dnswire.MimeJSON, strings.ToLower(f[2])
	tr, err := transport.New("https://"+target+f[0], opts)
	if err != nil {
		return nil
	}
	defer tr.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), t)
	q.RecursionDesired = true
	rec, err := tr.Exchange(ctx, q)
	if err != nil {
		return nil
	}
	return rec.Response
}

// ownHTTPS reads the HTTPS record of the resolver's own name, as it
// answers it: its ECH config's public name, and the ODoH config it
// carries under the drafts' odohconfig key.
func ownHTTPS(ctx context.Context, target string, r *DoH, base transport.Options) (string, *ODoHConfig) {
	resp := askOwn(ctx, target, r, base, dns.TypeHTTPS)
	if resp == nil {
		return "", nil
	}
	public := ""
	if cs, err := ech.Parse(ech.InAnswer(resp.Answer)); err == nil && len(cs) > 0 {
		public = cs[0].PublicName
	}
	var cfg *ODoHConfig
	if c, err := odoh.ParseConfigs(odoh.InAnswer(resp.Answer)); err == nil {
		cfg = odohConfig(c)
	}
	return public, cfg
}

// odohConfig is what verify records of a config.
func odohConfig(c odoh.Config) *ODoHConfig {
	return &ODoHConfig{KEM: c.KEM, KDF: c.KDF, AEAD: c.AEAD, KeyID: hex.EncodeToString(c.KeyID()[:8])}
}

// oblivious fetches the target's ODoH configs and, when it has one it
// can use, asks a query sealed to it at path, as a proxy would relay it.
func oblivious(ctx context.Context, target, path string, o Options) (*ODoHConfig, bool) {
	tr := httpsTo(target, o)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: o.Timeout}
	fetchCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := odoh.FetchConfig(fetchCtx, tr, target)
	if err != nil {
		return nil, false
	}
	cfg := odohConfig(c)
	asked := query(o.Name)
	wire, _ := asked.Pack()
	sealed, q, err := odoh.Seal(c, wire, 0)
	if err != nil {
		return cfg, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+target+path, bytes.NewReader(sealed))
	if err != nil {
		return cfg, false
	}
	req.Header.Set("Content-Type", odoh.ContentType)
	req.Header.Set("Accept", odoh.ContentType)
	resp, err := client.Do(req)
	if err != nil {
		return cfg, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil || resp.StatusCode != http.StatusOK {
		return cfg, false
	}
	answer, err := q.Open(body)
	if err != nil {
		return cfg, false
	}
	m, err := dnswire.Unpack(answer)
	if err != nil {
		return cfg, false
	}
	// Sealed under a key only this query's sender holds, the answer is
	// this query's whatever its ID; its question must still be the one
	// asked.
	m.Id = asked.Id
	return cfg, transport.CheckAnswer(asked, m) == nil
}

// fastOpen reports whether a second TLS connection's SYN carried data
// the server acknowledged (TCP_INFO's TCPI_OPT_SYN_DATA), the first one
// having fetched the cookie.
func fastOpen(ctx context.Context, target string, o Options) bool {
	acked := false
	for i := range 2 {
		c, err := dialTLS(ctx, target, o, tlsDial{alpn: []string{"dot"}, control: tfoConnect})
		if err != nil {
			return false
		}
		if sc, ok := c.NetConn().(syscall.Conn); ok && i == 1 {
			if rc, err := sc.SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) { acked = synDataAcked(fd) })
			}
		}
		c.Close()
	}
	return acked
}

package server

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/specfile"
	"github.com/doxlab/doxlab/transport"
)

// Config is one doxlab server: which listeners, one TLS identity for all
// of them, where answers come from, and the knobs experiments turn. The
// zero value of each field is its default.
type Config struct {
	// Listen maps each transport to its address. An empty address leaves
	// the transport off. Addresses are loopback unless set otherwise.
	Listen Listen `yaml:"listen"`
	// DoHPath is the DoH endpoint on the DoH and web listeners. Default /dns-query.
	DoHPath string `yaml:"doh_path"`
	// DoHJSONOnly serves only the JSON API (application/dns-json), refusing
	// RFC 8484 requests with 415, as some resolvers' endpoints do.
	DoHJSONOnly bool    `yaml:"doh_json_only"`
	TLS         TLS     `yaml:"tls"`
	Answers     Answers `yaml:"answers"`
	QUIC        QUIC    `yaml:"quic"`
	Faults      Faults  `yaml:"faults"`
	Limits      Limits  `yaml:"limits"`
	Web         Web     `yaml:"web"`
	ODoH        ODoH    `yaml:"odoh"`
	// Records is a file that receives one JSON line per query (and per
	// connection); "-" is standard output. Empty writes none.
	Records string `yaml:"records"`
	// Metrics is an address for a Prometheus /metrics endpoint. Empty: none.
	Metrics string `yaml:"metrics"`
}

// Listen holds the address of each listener.
type Listen struct {
	UDP  string `yaml:"udp"`  // Do53 over UDP
	TCP  string `yaml:"tcp"`  // Do53 over TCP
	DoT  string `yaml:"dot"`  // DNS over TLS, ALPN dot
	DoH  string `yaml:"doh"`  // DoH over HTTP/1.1 and HTTP/2 (TCP)
	DoH3 string `yaml:"doh3"` // DoH over HTTP/3 (UDP)
	DoQ  string `yaml:"doq"`  // DNS over QUIC
	Web  string `yaml:"web"`  // pages (and DoH) over HTTP/3 on UDP and HTTP/2 on TCP, same port
}

// TLS is the one identity every TLS and QUIC listener shares.
type TLS struct {
	// Cert and Key are PEM files. Empty: an ECDSA P-256 certificate is
	// generated at start for Names.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Names are the DNS names and IP addresses a generated certificate
	// covers. Default: localhost, 127.0.0.1, ::1 and the listen addresses.
	Names []string `yaml:"names"`
	// CertPerName generates a certificate of its own for each DNS name of
	// Names (one key for all, so one SPKI pin), chosen by the client's
	// SNI, as independent sites have: a client then cannot pool one
	// name's connection for another (RFC 9110 §4.3.3, Chromium's IP
	// pooling). Another SNI, or none, gets the certificate for all.
	CertPerName bool `yaml:"cert_per_name"`
	// TicketKeys is a file of session-ticket keys (32 random octets each,
	// first one current). It is created if missing, so restarts keep
	// tickets valid. Empty: fresh keys each start. The keys are shared by
	// every listener, so a ticket from one resumes on another.
	TicketKeys string `yaml:"ticket_keys"`
	// TokenKey is a file with the QUIC token key (32 octets), created if
	// missing, shared by the QUIC listeners. Empty: fresh each start.
	TokenKey string `yaml:"token_key"`
	// CertOut, if set, receives the certificate in use, for clients' --ca.
	CertOut string `yaml:"cert_out"`
	// MaxVersion caps the TLS version over TCP (DoT, DoH): "1.2" or "1.3"
	// (default). QUIC is always TLS 1.3.
	MaxVersion string `yaml:"max_version"`
	// NoDoTALPN leaves "dot" out of DoT's handshake, as many DoT servers
	// do: clients offering it get no ALPN back.
	NoDoTALPN bool `yaml:"no_dot_alpn"`
	// KeyLog is a file every connection's TLS secrets are appended to, in
	// NSS key log format, as each handshake goes: a capture of any
	// client's traffic (a browser's too) then decrypts in Wireshark and
	// in doxlab's overhead attribution.
	KeyLog string `yaml:"key_log"`
}

// Answers says where answers come from, tried in this order: Static,
// Hosts, Zone, Any, Forward. A name none of them knows is NXDOMAIN (or
// REFUSED when nothing is configured). The server is never an open
// recursive resolver unless Forward is set on purpose.
type Answers struct {
	Static  []string `yaml:"static"`  // resource records in zone-file syntax
	Hosts   string   `yaml:"hosts"`   // a hosts(5) file
	Zone    string   `yaml:"zone"`    // an RFC 1035 zone file
	Origin  string   `yaml:"origin"`  // the zone's origin; default from $ORIGIN or the SOA
	Any     string   `yaml:"any"`     // this IPv4 or IPv6 address for any name (the DoH-cost paper's setup)
	AnyTTL  uint32   `yaml:"any_ttl"` // TTL of Any answers; default 300
	Forward string   `yaml:"forward"` // an upstream URL over any doxlab transport
	Cache   bool     `yaml:"cache"`   // cache forwarded answers by their TTL
	// ForwardConn is how the forwarder connects: "reuse" (default) keeps
	// one connection open for every query; a condition (fresh, pam,
	// resumed, 0rtt; see transport.Conditions) opens a new connection per
	// query, carrying over what the condition names. A stub resolver in
	// front of a browser uses these for its warm and cold states.
	ForwardConn string `yaml:"forward_conn"`
	// ForwardCA is a PEM file to verify the upstream with; default the
	// system roots. ForwardSNI overrides the name verified.
	ForwardCA  string `yaml:"forward_ca"`
	ForwardSNI string `yaml:"forward_sni"`
	// ForwardRoots and ForwardRefuse are for a server started in a
	// process of doxlab's own (a campaign's stub): the roots to verify
	// the upstream with, beside ForwardCA's; and a check of addresses
	// (transport.Options.Refuse) that the upstream, and every A and AAAA
	// record forwarded, must pass: an answer with an address refused is
	// answered REFUSED, so the client never connects there.
	ForwardRoots  *x509.CertPool         `yaml:"-" json:"-"`
	ForwardRefuse func(netip.Addr) error `yaml:"-" json:"-"`
	// ForwardOpenSockets, if set, opens the forwarder's sockets
	// (transport.Options.OpenSockets): a server started in a testbed
	// host forwards from inside it.
	ForwardOpenSockets func(open func() error) error `yaml:"-" json:"-"`
	// ForwardInsecure skips verifying the upstream's certificate.
	ForwardInsecure bool `yaml:"forward_insecure"`
	// ForwardTimeout bounds one upstream exchange. Default 3 s.
	ForwardTimeout time.Duration `yaml:"forward_timeout"`
	// ForwardMaxInFlight bounds the queries forwarded and not yet
	// answered; beyond it a query is answered SERVFAIL at once (counted as
	// forward-limit), so an upstream that never answers cannot make the
	// server hold a goroutine per query for the whole timeout. Default
	// 1024.
	ForwardMaxInFlight int `yaml:"forward_max_in_flight"`
	// ForwardBudget bounds the queries forwarded upstream in the server's
	// life; past it a query is answered REFUSED at once (counted as
	// forward-budget). A page worker's stub, one a task, sets it: a page
	// cannot make the vantage point send the resolver it measures more
	// than a page's worth of queries. 0: no bound.
	ForwardBudget int `yaml:"forward_budget"`
}

// QUIC holds the knobs of the DoQ, DoH/3 and web listeners.
type QUIC struct {
	// NoZeroRTT refuses early data. By default 0-RTT is accepted before
	// the handshake completes, for DNS queries only (RFC 9250 §4.5).
	NoZeroRTT bool `yaml:"no_0rtt"`
	// Retry is address validation: "never" (default), "always" (a Retry
	// whenever the client has no valid token) or "first" (a Retry on the
	// first contact from an IP address only).
	Retry string `yaml:"retry"`
	// NoTokens stops honouring NEW_TOKEN tokens. quic-go v0.65 sends them
	// regardless; with this set they are never valid, so they do not spare
	// the client a Retry.
	NoTokens bool `yaml:"no_tokens"`
	// DraftALPNs also accepts the DoQ drafts' ALPNs doq-i00 ... doq-i11.
	DraftALPNs bool `yaml:"draft_alpns"`
	// ALPNs replaces DoQ's ALPNs, e.g. [doq-i02] for an old draft server.
	ALPNs []string `yaml:"alpns"`
	// Versions are the QUIC versions offered, of v1 and v2. Default both.
	Versions []string `yaml:"versions"`
}

func (q QUIC) versions() []quic.Version {
	if len(q.Versions) == 0 {
		return []quic.Version{quic.Version1, quic.Version2}
	}
	var out []quic.Version
	for _, v := range q.Versions {
		if v == "v2" {
			out = append(out, quic.Version2)
		} else {
			out = append(out, quic.Version1)
		}
	}
	return out
}

// Faults delay and drop answers, for head-of-line and timeout experiments.
type Faults struct {
	Delay            time.Duration            `yaml:"delay"`             // added to every answer
	DelayEvery       int                      `yaml:"delay_every"`       // delay every Nth query by DelayEveryBy
	DelayEveryBy     time.Duration            `yaml:"delay_every_by"`    // default 1 s
	DelayProbability float64                  `yaml:"delay_probability"` // delay a query by DelayEveryBy with this probability
	DelayNames       map[string]time.Duration `yaml:"delay_names"`       // per query name
	DropProbability  float64                  `yaml:"drop_probability"`  // never answer, with this probability
	// InOrder answers each TCP and DoT connection strictly in query order,
	// so a delayed answer holds back the ones after it. By default each
	// query is answered as soon as it is ready (RFC 7766 §7).
	InOrder bool `yaml:"in_order"`
}

// Limits protect the server, so that no single client can take it from
// the others (docs/server.md says what each refusal looks like). Zero
// values mean the defaults given.
type Limits struct {
	// MaxConns is the connection limit of each stream or QUIC listener;
	// default 1000. At the limit a new connection closes a stalled one
	// (see StallTimeout) or the one idle longest (no query in flight),
	// else a busy one of the network holding the most; with none to
	// close it is refused.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerSource is the most connections one client address (an
	// IPv6 /64) may hold on a listener; default max_conns/10.
	MaxConnsPerSource int           `yaml:"max_conns_per_source"`
	MaxStreams        int           `yaml:"max_streams"`  // concurrent queries per connection; default 100
	IdleTimeout       time.Duration `yaml:"idle_timeout"` // between queries; default 30 s
	// HandshakeTimeout is how long a new connection has for its handshake
	// and first query, and a query once begun has to arrive whole (TCP,
	// DoT, DoQ; DoH's handshake, headers and body); default 3 s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// StallTimeout is how long an answer may wait for the client to take
	// it (a write blocked: its receive window or congestion window closed,
	// its acknowledgements withheld) before its connection counts as
	// stalled, not answering: the first to be closed at the connection
	// limit; default 3 s.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	MaxMsg       int           `yaml:"max_msg"` // largest query accepted; default 65535
	// MaxConnBuffer bounds the octets of unfinished queries one DoQ
	// connection may hold; default 256 KiB. Beyond it the connection is
	// closed with DOQ_EXCESSIVE_LOAD.
	MaxConnBuffer int `yaml:"max_conn_buffer"`
	// TCPFastOpen accepts data in the SYN on TCP, DoT and DoH (RFC 7413),
	// where the kernel's net.ipv4.tcp_fastopen allows it.
	TCPFastOpen bool `yaml:"tcp_fastopen"`
}

// Web serves page snapshots for browser experiments.
type Web struct {
	// Roots maps a host name to a directory served for it; "*" is any host.
	Roots map[string]string `yaml:"roots"`
	// NoAltSvc leaves out the Alt-Svc header that announces HTTP/3.
	NoAltSvc bool `yaml:"no_alt_svc"`
	// NoDNSStream stops offering DNS streams on HTTP/3 (the SETTINGS
	// parameter of docs/dnsstream.md); DoH stays.
	NoDNSStream bool `yaml:"no_dns_stream"`
	// Origins are announced in an ORIGIN frame (RFC 9412) on every HTTP/3
	// connection, as https:// origins; default every root's host on the
	// listener's port. NoOrigin announces none (docs/origin.md).
	Origins  []string `yaml:"origins"`
	NoOrigin bool     `yaml:"no_origin"`
	// ECH serves Encrypted Client Hello (RFC 9849) on HTTP/3 and HTTP/2.
	ECH ECH `yaml:"ech"`
}

// ODoH makes the DoH endpoints an Oblivious DoH target, proxy or both
// (RFC 9230; docs/privacy.md): on the web listener over HTTP/3 and
// HTTP/2, on doh3, and on doh over HTTP/1.1 (its HTTP/2 is DoH's own).
// A POST of application/oblivious-dns-message to doh_path is relayed
// when it names targethost and targetpath, and answered otherwise.
type ODoH struct {
	// Target opens queries sealed to its key, answers them as DoH would,
	// and publishes its config at /.well-known/odohconfigs.
	Target bool `yaml:"target"`
	// KeyFile holds the target key's 32-octet seed, created if missing,
	// so a restart keeps the config. Empty: a fresh key each start.
	KeyFile string `yaml:"key_file"`
	// Proxy relays sealed queries to the targets ProxyTargets names
	// (host or host:port; "*" relays anywhere, an open relay).
	Proxy        bool     `yaml:"proxy"`
	ProxyTargets []string `yaml:"proxy_targets"`
	// ProxyHTTP is the proxy's HTTP version towards targets: "2"
	// (default) or "3". Connections to a target are kept and reused.
	ProxyHTTP string `yaml:"proxy_http"`
	// ProxyCA is a PEM file to verify targets with, beside ProxyRoots;
	// default the system roots.
	ProxyCA    string         `yaml:"proxy_ca"`
	ProxyRoots *x509.CertPool `yaml:"-" json:"-"`
	// ProxyTimeout bounds one relayed exchange; default 5s.
	ProxyTimeout time.Duration `yaml:"proxy_timeout"`
	// ProxyOpenSockets, if set, opens the proxy's sockets to targets (a
	// server in a testbed host: see Answers.ForwardOpenSockets).
	ProxyOpenSockets func(open func() error) error `yaml:"-" json:"-"`
}

// ECH is the web listener's Encrypted Client Hello (docs/privacy.md).
// The current config is published as ech= in every ServiceMode HTTPS
// record of the server's own data and sent as the retry config to a
// client whose config is stale; the one before it is still accepted.
type ECH struct {
	// PublicName is the name the outer ClientHello carries, which the
	// network sees instead of the site's (the certificate covers it: a
	// generated one includes it). ECH is on when it is set.
	PublicName string `yaml:"public_name"`
	// KeyFile holds the key's 32-octet seed, created if missing, so a
	// restart publishes the same config. Empty: a fresh key each start.
	KeyFile string `yaml:"key_file"`
	// Rotate makes a new key this often (keys made by rotation live in
	// memory only). Zero: never.
	Rotate time.Duration `yaml:"rotate"`
}

// LoadConfig reads a YAML config (ReadConfig) and checks it whole
// (Validate). Unknown fields are errors, named with their line, so a typo
// never silently changes an experiment.
func LoadConfig(path string) (*Config, error) {
	c, err := ReadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadConfig reads a config file strictly (unknown fields are errors)
// without checking it as a whole: a caller that sets more on top (the
// command line's flags override the file) validates after (New does).
func ReadConfig(path string) (*Config, error) {
	b, err := listfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	var c Config
	if err := specfile.Decode(path, b, &c).Err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the config and fills in defaults.
func (c *Config) Validate() error {
	if c.DoHPath == "" {
		c.DoHPath = "/dns-query"
	}
	if c.DoHPath[0] != '/' {
		return fmt.Errorf("doh_path %q must start with /", c.DoHPath)
	}
	l := c.Listen
	addrs := map[string]string{"listen.udp": l.UDP, "listen.tcp": l.TCP, "listen.dot": l.DoT, "listen.doh": l.DoH, "listen.doh3": l.DoH3, "listen.doq": l.DoQ, "listen.web": l.Web, "metrics": c.Metrics}
	n := 0
	for field, a := range addrs {
		if a == "" {
			continue
		}
		if field != "metrics" {
			n++
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%s: bad address %q: %w", field, a, err)
		}
	}
	if n == 0 {
		return fmt.Errorf("listen: no listener configured")
	}
	for _, v := range c.QUIC.Versions {
		if v != "v1" && v != "v2" {
			return fmt.Errorf("quic.versions: %q is not v1 or v2", v)
		}
	}
	switch c.TLS.MaxVersion {
	case "", "1.3", "1.2":
	default:
		return fmt.Errorf("tls.max_version: %q is not 1.2 or 1.3", c.TLS.MaxVersion)
	}
	switch c.QUIC.Retry {
	case "", "never", "always", "first":
	default:
		return fmt.Errorf("quic.retry: %q is not never, always or first", c.QUIC.Retry)
	}
	f := c.Faults
	for name, p := range map[string]float64{"faults.delay_probability": f.DelayProbability, "faults.drop_probability": f.DropProbability} {
		if p < 0 || p > 1 {
			return fmt.Errorf("%s: %v is not a probability", name, p)
		}
	}
	// Zero is each count's and duration's default; below it is a typo,
	// never a setting.
	for _, part := range []struct {
		prefix string
		v      any
	}{{"faults", c.Faults}, {"limits", c.Limits}, {"answers", c.Answers}} {
		if err := specfile.Negative(part.prefix, part.v); err != nil {
			return err
		}
	}
	for name, d := range f.DelayNames {
		if d < 0 {
			return fmt.Errorf("faults.delay_names.%s: %v is negative", name, d)
		}
	}
	if c.Faults.DelayEveryBy == 0 {
		c.Faults.DelayEveryBy = time.Second
	}
	if e := c.Web.ECH; e.PublicName != "" || e.KeyFile != "" || e.Rotate != 0 {
		if l.Web == "" {
			return fmt.Errorf("web.ech: needs listen.web")
		}
		if !ech.HostName(e.PublicName) { // what clients take (ech.Parse ignores a config of any other)
			return fmt.Errorf("web.ech.public_name: %q is not a host name (RFC 9849 §4 wants letters, digits and hyphens, not an address)", e.PublicName)
		}
		if e.Rotate < 0 || (e.Rotate > 0 && e.Rotate < time.Second) {
			return fmt.Errorf("web.ech.rotate: %v: want 0 (never) or at least 1s", e.Rotate)
		}
	}
	if err := c.ODoH.validate(l); err != nil {
		return err
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return fmt.Errorf("tls: cert and key go together")
	}
	if c.Answers.Any != "" && net.ParseIP(c.Answers.Any) == nil {
		return fmt.Errorf("answers.any: %q is not an IP address", c.Answers.Any)
	}
	switch fc := c.Answers.ForwardConn; {
	case fc == "" || fc == "reuse":
	case transport.Conditions[fc].Name == "":
		return fmt.Errorf("answers.forward_conn: %q is not reuse, fresh, pam, resumed or 0rtt", fc)
	}
	if c.Answers.ForwardMaxInFlight <= 0 {
		c.Answers.ForwardMaxInFlight = 1024
	}
	if c.Answers.ForwardTimeout <= 0 {
		c.Answers.ForwardTimeout = 3 * time.Second
	}
	if c.Answers.AnyTTL == 0 {
		c.Answers.AnyTTL = 300
	}
	lim := &c.Limits
	if lim.MaxConns <= 0 {
		lim.MaxConns = 1000
	}
	if lim.MaxConnsPerSource <= 0 {
		lim.MaxConnsPerSource = max(1, lim.MaxConns/10)
	}
	if lim.HandshakeTimeout <= 0 {
		lim.HandshakeTimeout = 3 * time.Second
	}
	if lim.StallTimeout <= 0 {
		lim.StallTimeout = 3 * time.Second
	}
	if lim.MaxConnBuffer <= 0 {
		lim.MaxConnBuffer = 256 << 10
	}
	if lim.MaxStreams <= 0 {
		lim.MaxStreams = 100
	}
	if lim.IdleTimeout <= 0 {
		lim.IdleTimeout = 30 * time.Second
	}
	if lim.MaxMsg <= 0 || lim.MaxMsg > 65535 {
		lim.MaxMsg = 65535
	}
	for host, dir := range c.Web.Roots {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("web.roots[%s]: %q is not a directory", host, dir)
		}
	}
	return nil
}

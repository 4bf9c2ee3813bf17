package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/odoh"
)

// ODoHFacts is what an Oblivious DoH exchange adds to its record: the
// client's HPKE work, the sealed sizes, and the proxy's exchange with
// the target as the proxy reports it (Server-Timing "target"), so the
// two hops can be told apart. The client→proxy hop is the record's own
// timing and connection.
type ODoHFacts struct {
	Target   string  `json:"target"`              // host[:port] the proxy relayed to
	SealMs   float64 `json:"seal_ms"`             // sealing the query to the target's key
	OpenMs   float64 `json:"open_ms"`             // opening the answer (after Timing.TotalMs, which ends at its arrival)
	TargetMs float64 `json:"target_ms,omitempty"` // the proxy's exchange with the target; 0 when it did not say
	// ConfigMs is fetching the target's config, when this exchange did
	// (the first, and after the target changed its key): before the
	// exchange's own timing starts, as resolving the server's name is.
	ConfigMs float64 `json:"config_ms,omitempty"`
	Sealed   Counts  `json:"sealed"` // the sealed query and answer, in octets
}

// oblivious seals a DoH transport's queries to an ODoH target: the
// request goes to the proxy the endpoint names (targethost and
// targetpath in its query), always as a POST.
type oblivious struct {
	host, path string // the target's
	roots      func() *tls.Config
	open       func(func() error) error // the transport's OpenSockets
	refuse     func(netip.Addr) error   // the transport's Refuse, asked of the target's address too
	timeout    time.Duration

	mu      sync.Mutex
	config  *odoh.Config
	fetched float64 // ms the last fetch took, for the next exchange's record
}

// odohState is one exchange's: the sealed query, to open the answer.
type odohState struct {
	q     *odoh.Query
	facts *ODoHFacts
}

// parseODoHTarget reads an odoh URL's target, host[:port][/path] or an
// https:// URL, and returns its host[:port] and path.
func parseODoHTarget(raw string) (host, path string, err error) {
	s := strings.TrimPrefix(raw, "https://")
	host, path, _ = strings.Cut(s, "/")
	path = "/" + path
	if path == "/" {
		path = "/dns-query"
	}
	if host == "" || strings.ContainsAny(host, "@?# ") || strings.ContainsAny(path, "?# ") {
		return "", "", fmt.Errorf("target %q: want host[:port][/path]", raw)
	}
	return host, path, nil
}

// runOblivious is run for DoH and DoH/3. An ODoH transport fetches the
// target's config first, when it is not known yet, before the
// exchange's timing begins; an exchange whose fetch failed reports that
// failure, rather than fetching again (a target that never answers
// held it for two timeouts).
func (b *base) runOblivious(ctx context.Context, q *dns.Msg, do func(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error)) (*Record, error) {
	if b.obl == nil {
		return b.run(ctx, q, do)
	}
	_, configErr := b.obl.getConfig(ctx)
	return b.run(ctx, q, func(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error) {
		x.odohConfigErr = configErr
		return do(ctx, x, q)
	})
}

// getConfig returns the target's ODoH config, fetched from its well-known
// URL once (directly: the target learns the client's address once, not
// its queries).
func (o *oblivious) getConfig(ctx context.Context) (odoh.Config, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.config != nil {
		return *o.config, nil
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tr := &http.Transport{TLSClientConfig: o.roots(), ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			if addr, err = o.allowed(ctx, addr); err != nil {
				return nil, err
			}
			err = o.open(func() error {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}
	defer tr.CloseIdleConnections()
	c, err := odoh.FetchConfig(ctx, tr, o.host)
	if err != nil {
		return odoh.Config{}, err
	}
	o.config = &c
	o.fetched = ms(time.Since(start))
	return c, nil
}

// allowed resolves the target's host:port to the address it dials, and
// asks the transport's Refuse about it: the client contacts the target
// itself for its config, so a campaign's blocklist binds there too.
func (o *oblivious) allowed(ctx context.Context, hostport string) (string, error) {
	if o.refuse == nil {
		return hostport, nil
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return "", fmt.Errorf("resolving the ODoH target %s: %w", host, err)
	}
	a := addrs[0]
	for _, x := range addrs {
		if x.Unmap().Is4() {
			a = x
			break
		}
	}
	if err := o.refuse(a.Unmap()); err != nil {
		return "", fmt.Errorf("not contacting the ODoH target %s: %w: %w", host, ErrNotAllowed, err)
	}
	return net.JoinHostPort(a.Unmap().String(), port), nil
}

// forget drops the config after the target refused it (401: a new key).
func (o *oblivious) forget() {
	o.mu.Lock()
	o.config = nil
	o.mu.Unlock()
}

// request seals the query and makes the POST to the proxy.
func (o *oblivious) request(ctx context.Context, x *exch, proxyURL string, wire []byte) (*http.Request, error) {
	facts := &ODoHFacts{Target: o.host}
	x.rec.ODoH = facts
	if x.odohConfigErr != nil {
		return nil, x.odohConfigErr
	}
	c, err := o.getConfig(ctx)
	o.mu.Lock()
	facts.ConfigMs, o.fetched = o.fetched, 0
	o.mu.Unlock()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	sealed, q, err := odoh.Seal(c, wire, 0)
	facts.SealMs = ms(time.Since(start))
	if err != nil {
		return nil, err
	}
	facts.Sealed.Sent = int64(len(sealed))
	x.odoh = &odohState{q: q, facts: facts}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxyURL, bytes.NewReader(sealed))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", odoh.ContentType)
	req.Header.Set("Accept", odoh.ContentType)
	return req, nil
}

// decode opens the target's answer relayed by the proxy.
func (o *oblivious) decode(x *exch, resp *http.Response, body []byte, q *dns.Msg) (*dns.Msg, error) {
	st := x.odoh
	if st == nil {
		return nil, fmt.Errorf("ODoH: no query sealed")
	}
	st.facts.TargetMs = serverTiming(resp.Header.Get("Server-Timing"), "target")
	if resp.StatusCode == http.StatusUnauthorized {
		o.forget() // the target's key changed: the next exchange fetches it anew
	}
	if resp.StatusCode != http.StatusOK {
		return dnswire.DecodeDoHResponse(resp.StatusCode, "", body, false, q) // its HTTPError
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != odoh.ContentType {
		return nil, dnswire.Malformed("the proxy answered %q, not %s", resp.Header.Get("Content-Type"), odoh.ContentType)
	}
	st.facts.Sealed.Received = int64(len(body))
	start := time.Now()
	wire, err := st.q.Open(body)
	st.facts.OpenMs = ms(time.Since(start))
	if err != nil {
		return nil, dnswire.Malformed("%v", err)
	}
	x.rec.DNSBytes.Received = int64(len(wire)) // the DNS message, as for DoH; the sealed one is in facts
	return dnswire.Unpack(wire)
}

// serverTiming is the duration of the named metric of a Server-Timing
// header (RFC 9651's form, as browsers read it), 0 when absent.
func serverTiming(header, name string) float64 {
	for _, metric := range strings.Split(header, ",") {
		parts := strings.Split(metric, ";")
		if strings.TrimSpace(parts[0]) != name {
			continue
		}
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok {
				// The proxy's word: only a duration an exchange can take
				// (NaN or Inf would leave a record JSON cannot hold).
				d, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
					return 0
				}
				return d
			}
		}
	}
	return 0
}

// proxyQuery is the proxy URL's query naming the target (RFC 9230 §4.1).
func proxyQuery(host, path string) string {
	return "targethost=" + url.QueryEscape(host) + "&targetpath=" + url.QueryEscape(path)
}

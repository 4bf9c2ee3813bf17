package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/odoh"
)

// maxODoHMessage bounds a sealed message read from a client or a target:
// a DNS message's 64 KiB, its padding and HPKE's overhead.
const maxODoHMessage = 1 << 17

func (o *ODoH) validate(l Listen) error {
	if !o.Target && !o.Proxy {
		if o.KeyFile != "" || len(o.ProxyTargets) > 0 || o.ProxyHTTP != "" || o.ProxyCA != "" {
			return fmt.Errorf("odoh: settings given, but neither odoh.target nor odoh.proxy is on")
		}
		return nil
	}
	if l.Web == "" && l.DoH3 == "" && l.DoH == "" {
		return fmt.Errorf("odoh: needs a DoH endpoint (listen.web, listen.doh3 or listen.doh)")
	}
	if o.Proxy && len(o.ProxyTargets) == 0 {
		return fmt.Errorf(`odoh.proxy: name its targets in odoh.proxy_targets ("*" for any: an open relay)`)
	}
	for _, t := range o.ProxyTargets {
		if t != "*" && (t == "" || strings.ContainsAny(t, "/@?# ")) {
			return fmt.Errorf("odoh.proxy_targets: %q is not a host or host:port", t)
		}
	}
	switch o.ProxyHTTP {
	case "", "2", "3":
	default:
		return fmt.Errorf(`odoh.proxy_http: %q is not "2" or "3"`, o.ProxyHTTP)
	}
	if o.ProxyTimeout < 0 {
		return fmt.Errorf("odoh.proxy_timeout: negative")
	}
	return nil
}

// loadODoH makes the target's key (nil when not a target) and the proxy
// (nil when not one).
func loadODoH(c *ODoH) (*odoh.KeyPair, *odohProxy, error) {
	var kp *odoh.KeyPair
	if c.Target {
		var seed []byte
		if c.KeyFile != "" {
			var err error
			if seed, err = keyFile(c.KeyFile); err != nil {
				return nil, nil, fmt.Errorf("odoh.key_file: %w", err)
			}
		}
		var err error
		if kp, err = odoh.NewKeyPair(seed); err != nil {
			return nil, nil, err
		}
	}
	if !c.Proxy {
		return kp, nil, nil
	}
	p, err := newODoHProxy(c)
	return kp, p, err
}

// oblivious routes ODoH messages to the target or the proxy and every
// other request to next (plain DoH; nil where only ODoH comes).
func (s *Server) oblivious(listener string, next http.Handler) http.Handler {
	if s.odoh == nil && s.proxy == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.isODoH(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		switch relay := q.Has("targethost") || q.Has("targetpath"); {
		case r.Method != http.MethodPost:
			s.odohRefuse(listener, w, r, http.StatusMethodNotAllowed, "ODoH is POST only (RFC 9230 §4.1)")
		case relay && s.proxy == nil:
			s.odohRefuse(listener, w, r, http.StatusBadRequest, "not an ODoH proxy")
		case relay:
			s.proxy.serve(s, listener, w, r)
		case s.odoh == nil:
			s.odohRefuse(listener, w, r, http.StatusUnsupportedMediaType, "not an ODoH target")
		default:
			s.odohTarget(listener, w, r)
		}
	})
}

// isODoH says whether a request of this content type is the target's or
// the proxy's.
func (s *Server) isODoH(ctype string) bool {
	if s.odoh == nil && s.proxy == nil {
		return false
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt == odoh.ContentType
}

// odohConfigs publishes the target's ObliviousDoHConfigs (§6.1).
func (s *Server) odohConfigs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "max-age=86400")
	w.Write(odoh.MarshalConfigs(s.odoh.Config))
}

// odohRefuse answers an ODoH request with an HTTP error, recorded as a
// refusal.
func (s *Server) odohRefuse(listener string, w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.refuse(listener, "odoh", remoteAddr(r), ReasonBadRequest, fmt.Sprintf("%d %s", code, msg))
	http.Error(w, msg, code)
}

// odohTarget opens a sealed query, answers it as any query and seals
// the answer to it. A query to another key is answered 401, as RFC 9230
// §7 has it, so that the client fetches the config anew.
func (s *Server) odohTarget(listener string, w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	rec := httpRecord(listener, r)
	rec.Transport = "odoh"
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxODoHMessage))
	if err != nil {
		s.odohRefuse(listener, w, r, http.StatusBadRequest, "reading the message: "+err.Error())
		return
	}
	msg, rcv, err := s.odoh.Open(body)
	if errors.Is(err, odoh.ErrUnknownKey) {
		s.odohRefuse(listener, w, r, http.StatusUnauthorized, err.Error())
		return
	}
	q := new(dns.Msg)
	if err == nil {
		err = q.Unpack(msg)
	}
	if err == nil && q.Response {
		err = errors.New("not a query: QR=1")
	}
	if err != nil {
		s.odohRefuse(listener, w, r, http.StatusBadRequest, err.Error())
		return
	}
	id := q.Id
	resp := s.handle(r.Context(), q, rec, received)
	if resp == nil {
		<-r.Context().Done() // dropped: the client times out
		return
	}
	resp.Id = id
	wire, err := resp.Pack()
	if err == nil {
		wire, err = rcv.Seal(wire, 0)
	}
	if err != nil { // an answer over the 65,515 octets a message seals
		http.Error(w, "sealing the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", odoh.ContentType)
	w.Header().Set("Cache-Control", "no-cache, no-store") // §4.3: an answer to one client only
	w.Write(wire)
}

// odohProxy relays sealed queries to targets (RFC 9230 §4.2). It sees
// the client and the target, never the query.
type odohProxy struct {
	targets []string
	timeout time.Duration
	rt      http.RoundTripper
}

func newODoHProxy(c *ODoH) (*odohProxy, error) {
	roots := c.ProxyRoots
	if c.ProxyCA != "" {
		pem, err := listfile.Read(c.ProxyCA)
		if err != nil {
			return nil, fmt.Errorf("odoh.proxy_ca: %w", err)
		}
		if roots == nil {
			if roots, err = x509.SystemCertPool(); err != nil {
				roots = x509.NewCertPool()
			}
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("odoh.proxy_ca: no certificate in %s", c.ProxyCA)
		}
	}
	p := &odohProxy{targets: c.ProxyTargets, timeout: c.ProxyTimeout}
	if p.timeout == 0 {
		p.timeout = 5 * time.Second
	}
	open := c.ProxyOpenSockets
	if open == nil {
		open = func(f func() error) error { return f() }
	}
	tlsConf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if c.ProxyHTTP == "3" {
		p.rt = &http3.Transport{TLSClientConfig: tlsConf,
			Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				var udp net.PacketConn
				if err := open(func() (err error) {
					udp, err = net.ListenPacket("udp", ":0")
					return err
				}); err != nil {
					return nil, err
				}
				ua, err := net.ResolveUDPAddr("udp", addr)
				if err != nil {
					udp.Close()
					return nil, err
				}
				c, err := quic.DialEarly(ctx, udp, ua, tc, qc)
				if err != nil {
					udp.Close()
					return nil, err
				}
				go func() { // quic-go leaves a socket it was handed open
					<-c.Context().Done()
					udp.Close()
				}()
				return c, nil
			}}
	} else {
		d := &net.Dialer{Timeout: p.timeout}
		p.rt = &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
			DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
				err = open(func() error {
					c, err = d.DialContext(ctx, network, addr)
					return err
				})
				return c, err
			}}
	}
	return p, nil
}

// allowed says whether the proxy relays to host (host or host:port).
func (p *odohProxy) allowed(host string) bool {
	if slices.Contains(p.targets, "*") || slices.Contains(p.targets, host) {
		return true
	}
	h, _, err := net.SplitHostPort(host)
	return err == nil && slices.Contains(p.targets, h)
}

// serve relays one message to targethost's targetpath and the answer
// back, with the target exchange's duration in Server-Timing ("target"),
// so a client can tell the two hops apart.
func (p *odohProxy) serve(s *Server, listener string, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := httpRecord(listener, r)
	rec.Kind, rec.Transport = "proxy", "odoh"
	q := r.URL.Query()
	host, path := q.Get("targethost"), q.Get("targetpath")
	rec.Target = host
	switch {
	case host == "" || strings.ContainsAny(host, "/@?# "):
		s.odohRefuse(listener, w, r, http.StatusBadRequest, fmt.Sprintf("targethost %q: want host or host:port", host))
		return
	case !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# "):
		s.odohRefuse(listener, w, r, http.StatusBadRequest, fmt.Sprintf("targetpath %q: want a path", path))
		return
	case !p.allowed(host):
		s.odohRefuse(listener, w, r, http.StatusForbidden, "this proxy does not relay to "+host)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxODoHMessage))
	if err != nil {
		s.odohRefuse(listener, w, r, http.StatusBadRequest, "reading the message: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	sent := time.Now()
	status, answer, err := p.relay(ctx, "https://"+host+path, body)
	rec.TargetMs = ms(time.Since(sent))
	if err != nil {
		code := http.StatusBadGateway
		if ctx.Err() != nil {
			code = http.StatusGatewayTimeout
		}
		rec.Error = err.Error()
		rec.ServerMs = ms(time.Since(start))
		s.record(rec)
		http.Error(w, "target: "+err.Error(), code)
		return
	}
	w.Header().Set("Server-Timing", fmt.Sprintf("target;dur=%.3f", rec.TargetMs))
	w.Header().Set("Cache-Control", "no-cache, no-store")
	if status != http.StatusOK {
		rec.Error = fmt.Sprintf("target answered %d", status)
	}
	w.Header().Set("Content-Type", odoh.ContentType)
	w.WriteHeader(status) // the target's status goes back as it was (§4.3)
	w.Write(answer)
	rec.ServerMs = ms(time.Since(start))
	s.record(rec)
}

// relay POSTs a sealed message to the target and reads its answer.
func (p *odohProxy) relay(ctx context.Context, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", odoh.ContentType)
	req.Header.Set("Accept", odoh.ContentType)
	resp, err := p.rt.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxODoHMessage))
	if err != nil {
		return 0, nil, err
	}
	// The status goes back as it was, so it must be one a response
	// carries: Go's HTTP/1.1 client takes any three digits (000, 099),
	// which a ResponseWriter refuses or, doxlab's HTTP/2 one, turns to 200.
	if resp.StatusCode < 200 || resp.StatusCode > 599 {
		return 0, nil, fmt.Errorf("target answered HTTP status %03d", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode == http.StatusOK && mt != odoh.ContentType {
		return 0, nil, fmt.Errorf("target answered %q, not %s", resp.Header.Get("Content-Type"), odoh.ContentType)
	}
	return resp.StatusCode, answer, nil
}

func (p *odohProxy) Close() error {
	if c, ok := p.rt.(io.Closer); ok {
		return c.Close()
	}
	if t, ok := p.rt.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	return nil
}

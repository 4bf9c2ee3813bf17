package transport

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/protocol"
)

// The protocols, as recorded in Record.Protocol (package protocol's names).
const (
	ProtoUDP  = protocol.UDP
	ProtoTCP  = protocol.TCP
	ProtoDoT  = protocol.DoT
	ProtoDoH1 = protocol.DoH1
	ProtoDoH2 = protocol.DoH2
	ProtoDoH3 = protocol.DoH3
	ProtoDoQ  = protocol.DoQ
	ProtoODoH = protocol.ODoH
)

// Endpoint is a parsed server URL.
type Endpoint struct {
	URL      string
	Scheme   string // udp, tcp, tls, https, h3, quic
	Protocol string // one of the Proto constants
	Host     string // name or IP literal, without brackets
	Port     int
	Path     string // DoH only; default /dns-query
	// Target and TargetPath are an ODoH URL's target (host[:port] and
	// path); Host, Port and Path are then its proxy's.
	Target, TargetPath string
}

// Resolver is the host of the resolver that answers: an ODoH URL's
// target (its proxy relays, sealed, and answers nothing), the server's
// host otherwise. Reports group a resolver's transports by it.
func (e *Endpoint) Resolver() string {
	if e.Target == "" {
		return e.Host
	}
	if h, _, err := net.SplitHostPort(e.Target); err == nil {
		return h
	}
	return strings.Trim(e.Target, "[]")
}

// HostPort is the address to dial, host:port with IPv6 in brackets.
func (e *Endpoint) HostPort() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// ParseURL parses a server URL such as quic://[::1]:853 or
// https://dns.example/dns-query.
func ParseURL(raw string) (*Endpoint, error) {
	if !strings.Contains(raw, "://") {
		return nil, fmt.Errorf("bad server URL %q: want scheme://host[:port], scheme one of %s", raw, strings.Join(protocol.Schemes(), ", "))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bad server URL %q: %w", raw, err)
	}
	s, ok := protocol.ForScheme(strings.ToLower(u.Scheme))
	if !ok {
		return nil, fmt.Errorf("bad server URL %q: unknown scheme %q (want %s)", raw, u.Scheme, protocol.OneOf(protocol.Schemes()))
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("bad server URL %q: a fragment (#) has no meaning here", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("bad server URL %q: credentials in the URL are not supported", raw)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("bad server URL %q: no host", raw)
	}
	if strings.ContainsAny(host, " /\\") {
		return nil, fmt.Errorf("bad server URL %q: bad host %q", raw, host)
	}
	port := s.Port
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("bad server URL %q: bad port %q", raw, p)
		}
		port = n
	}
	ep := &Endpoint{URL: raw, Scheme: strings.ToLower(u.Scheme), Protocol: s.Name, Host: host, Port: port}
	switch ep.Scheme {
	case "odoh":
		// odoh://PROXY[:port][/path]?target=HOST[:port][/path] (RFC 9230's
		// proxy URI template, filled: targethost and targetpath).
		q := u.Query()
		for k := range q {
			if k != "target" {
				return nil, fmt.Errorf("bad server URL %q: an odoh URL takes only target=, not %s=", raw, k)
			}
		}
		if q.Get("target") == "" {
			return nil, fmt.Errorf("bad server URL %q: an odoh URL names its target: odoh://PROXY/PATH?target=HOST[:PORT][/PATH]", raw)
		}
		if ep.Target, ep.TargetPath, err = parseODoHTarget(q.Get("target")); err != nil {
			return nil, fmt.Errorf("bad server URL %q: %w", raw, err)
		}
		ep.Path = u.EscapedPath()
		if ep.Path == "" {
			ep.Path = "/dns-query"
		}
		ep.Path += "?" + proxyQuery(ep.Target, ep.TargetPath)
	case "https", "h3":
		ep.Path = u.EscapedPath()
		if ep.Path == "" {
			ep.Path = "/dns-query"
		}
		if u.RawQuery != "" {
			ep.Path += "?" + u.RawQuery
		}
	default:
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("bad server URL %q: a %s URL takes no path", raw, ep.Scheme)
		}
	}
	return ep, nil
}

// resolvedAddr resolves the server's name once per transport, outside the
// timed exchange: resolving the resolver is not part of what is measured.
type resolvedAddr struct {
	mu sync.Mutex
	ip net.IP
}

func (b *base) serverIP(ctx context.Context) (net.IP, error) {
	b.addrOnce.mu.Lock()
	defer b.addrOnce.mu.Unlock()
	if b.addrOnce.ip != nil {
		return b.addrOnce.ip, nil
	}
	ip := net.ParseIP(b.ep.Host)
	if ip == nil {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", b.ep.Host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", b.ep.Host, err)
		}
		// The first IPv4 address, else the first address: one fixed
		// choice, so a series of measurements does not flip between
		// address families.
		ip = ips[0]
		for _, a := range ips {
			if a.To4() != nil {
				ip = a
				break
			}
		}
	}
	if b.opts.Refuse != nil {
		a, _ := netip.AddrFromSlice(ip)
		if err := b.opts.Refuse(a.Unmap()); err != nil {
			return nil, fmt.Errorf("not contacting %s: %w: %w", b.ep.Host, ErrNotAllowed, err)
		}
	}
	b.addrOnce.ip = ip
	return ip, nil
}

// serverAddr is the IP:port to dial.
func (b *base) serverAddr(ctx context.Context) (string, error) {
	ip, err := b.serverIP(ctx)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(b.ep.Port)), nil
}

// localAddr parses a bind address and returns a maker for the network in use.
func localAddr(s string) (func(proto string) net.Addr, error) {
	host, port := s, "0"
	if strings.Contains(s, ":") && (!strings.Contains(s, "]") && strings.Count(s, ":") == 1 || strings.Contains(s, "]:")) {
		var err error
		host, port, err = net.SplitHostPort(s)
		if err != nil {
			return nil, fmt.Errorf("bad local address %q: %w", s, err)
		}
	}
	host = strings.Trim(host, "[]")
	var ip net.IP
	if host != "" {
		if ip = net.ParseIP(host); ip == nil {
			return nil, fmt.Errorf("bad local address %q: %q is not an IP address", s, host)
		}
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, fmt.Errorf("bad local address %q: bad port %q", s, port)
	}
	return func(proto string) net.Addr {
		switch proto {
		case ProtoUDP, ProtoDoQ, ProtoDoH3:
			return &net.UDPAddr{IP: ip, Port: p}
		}
		return &net.TCPAddr{IP: ip, Port: p}
	}, nil
}

// LoadCA reads PEM certificates to verify servers against.
func LoadCA(path string) (*x509.CertPool, error) {
	pem, err := listfile.Read(path)
	if err != nil {
		return nil, err
	}
	pool, err := CertPool(pem)
	if err != nil {
		return nil, fmt.Errorf("%s %w", path, err)
	}
	return pool, nil
}

// CertPool is a pool of the PEM certificates given.
func CertPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("holds no PEM certificate")
	}
	return pool, nil
}

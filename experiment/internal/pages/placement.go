package pages

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/server"
)

// Placement lays a multi-origin page's origins out over server hosts, as
// on the web: the first party on its origin server, shared CDN origins on
// a CDN edge near the client, third parties on a host of their own, each
// host with its own access link, so that each is at its own distance.
// The paper's one-origin pages stay on "server", which is also the
// resolver for every origin.
type Placement struct {
	Name     string                   `json:"name"`
	Host     map[string]string        `json:"host"`     // an origin's party → the testbed host serving it
	Distance map[string]time.Duration `json:"distance"` // a server host → the RTT its link adds
	// SharedCert names the server hosts whose origins share one
	// certificate, as a CDN's customers on one shared certificate; the
	// other hosts have a certificate per origin, as independent sites.
	SharedCert map[string]bool `json:"shared_cert,omitempty"`
}

// DefaultPlacement puts the first party 30 ms beyond the client's access
// link, a CDN edge 2 ms beyond it and the third parties 10 ms: the
// access profile's RTT reaches the resolver, as in the papers.
var DefaultPlacement = Placement{
	Name:     "separate",
	Host:     map[string]string{corpus.PartyFirst: "origin", corpus.PartyCDN: "cdn", corpus.PartyThird: "third"},
	Distance: map[string]time.Duration{"origin": 30 * time.Millisecond, "cdn": 2 * time.Millisecond, "third": 10 * time.Millisecond},
}

// CDNPlacement serves every origin of a multi-origin page from one CDN
// edge 2 ms beyond the access link, on one certificate that covers them
// all: what a CDN fronting a site and its third parties offers, and where
// ORIGIN frames (RFC 9412) can spare a page all but one lookup and one
// handshake.
var CDNPlacement = Placement{
	Name:       "cdn",
	Host:       map[string]string{corpus.PartyFirst: "cdn", corpus.PartyCDN: "cdn", corpus.PartyThird: "cdn"},
	Distance:   map[string]time.Duration{"cdn": 2 * time.Millisecond},
	SharedCert: map[string]bool{"cdn": true},
}

// Placements are the placements by name.
var Placements = map[string]Placement{DefaultPlacement.Name: DefaultPlacement, CDNPlacement.Name: CDNPlacement}

// HostOf is the testbed host serving origin o of page p.
func (pl Placement) HostOf(p corpus.Page, o corpus.Origin) string {
	if h, ok := pl.Host[o.Party]; ok && p.MultiOrigin() {
		return h
	}
	return "server"
}

// Hosts are the server hosts pages need besides "server", in order.
func (pl Placement) Hosts(pages []corpus.Page) []string {
	var out []string
	for _, p := range pages {
		for _, o := range p.Origins {
			if h := pl.HostOf(p, o); h != "server" && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Apply puts each extra server host at its distance (experiment.
// SetDistance: on the loopback net the hosts are all as near, which the
// runs' "net" says).
func (pl Placement) Apply(tb experiment.Net, hosts []string) error {
	for _, h := range hosts {
		if _, err := experiment.SetDistance(tb, h, pl.Distance[h]); err != nil {
			return fmt.Errorf("server host %s: %w", h, err)
		}
	}
	return nil
}

// PageServers configures doxlab's server for each server host, given
// their addresses. "server" runs every DNS transport on its standard port
// and answers for every origin: its address records point at the host
// serving it, with the origin's TTL, through the CDN's name where the
// origin is a CNAME, and an HTTPS record (RFC 9460) offering h3 and h2
// where the origin publishes one: always on a multi-origin page, as on
// the web, and on a one-origin page with https (the papers' setups had
// none). Every host serves its origins
// over HTTP/3 and HTTP/2 on 443 ("server" with DoH and DNS streams on the
// same listener), with one TLS key for its address and its origins; the
// other hosts with a certificate per origin.
func PageServers(ipOf func(host string) string, pages []corpus.Page, https bool, pl Placement) map[string]*server.Config {
	cfgs := map[string]*server.Config{}
	cfg := func(host string) *server.Config {
		if c, ok := cfgs[host]; ok {
			return c
		}
		ip := ipOf(host)
		c := &server.Config{
			Listen: server.Listen{Web: ip + ":443"},
			TLS:    server.TLS{Names: []string{ip, "localhost"}},
			Web:    server.Web{Roots: map[string]string{}},
		}
		if host == "server" {
			c.Listen = server.Listen{UDP: ip + ":53", TCP: ip + ":53", DoT: ip + ":853", DoQ: ip + ":853", Web: ip + ":443"}
		} else {
			// Independent sites: no origin's certificate covers another,
			// so a browser opens a connection per origin, as on the web,
			// rather than pooling origins that share an address; a CDN's
			// shared certificate covers all its origins.
			c.TLS.CertPerName = !pl.SharedCert[host]
		}
		cfgs[host] = c
		return c
	}
	dns := cfg("server")
	seen := map[string]bool{}
	for _, p := range pages {
		for _, o := range p.Origins {
			if seen[o.Host] {
				continue
			}
			seen[o.Host] = true
			host := pl.HostOf(p, o)
			ip := ipOf(host)
			c := cfg(host)
			c.Web.Roots[o.Host] = o.Dir
			c.TLS.Names = append(c.TLS.Names, o.Host)
			owner := o.Host
			if o.CNAME != "" {
				dns.Answers.Static = append(dns.Answers.Static, fmt.Sprintf("%s. 300 IN CNAME %s.", o.Host, o.CNAME))
				owner = o.CNAME
			}
			dns.Answers.Static = append(dns.Answers.Static, fmt.Sprintf("%s. %d IN A %s", owner, o.TTL, ip))
			if o.HTTPS && (https || p.MultiOrigin()) {
				dns.Answers.Static = append(dns.Answers.Static, fmt.Sprintf("%s. %d IN HTTPS 1 . alpn=h3,h2 ipv4hint=%s", owner, o.TTL, ip))
			}
		}
	}
	return cfgs
}

// Servers are the page servers of an experiment, one per server host.
type Servers map[string]*server.Server

// StartPageServers starts PageServers' configurations in their hosts:
// "server" first, the others after.
func StartPageServers(tb experiment.Net, cfgs map[string]*server.Config) (Servers, error) {
	srvs := Servers{}
	hosts := slices.Sorted(maps.Keys(cfgs))
	if i := slices.Index(hosts, "server"); i > 0 {
		hosts = append([]string{"server"}, slices.Delete(hosts, i, i+1)...)
	}
	for _, h := range hosts {
		srv, err := experiment.StartServerIn(tb, h, cfgs[h])
		if err != nil {
			srvs.Close()
			return nil, err
		}
		srvs[h] = srv
	}
	return srvs, nil
}

// Close stops every server.
func (s Servers) Close() {
	for _, srv := range s {
		srv.Close()
	}
}

// OnRecord hands every server's records to f.
func (s Servers) OnRecord(f func(*server.Record)) {
	for _, srv := range s {
		srv.OnRecord(f)
	}
}

// Settle waits, at most a second, until every server has written the
// records of the QUIC connections whose handshakes are done (see
// server.Server.Settle).
func (s Servers) Settle(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, srv := range s {
		srv.Settle(ctx)
	}
}

// Configs are the configurations of the server hosts other than
// "server", for a run's record.
func (s Servers) Configs() map[string]*server.Config {
	out := map[string]*server.Config{}
	for h, srv := range s {
		if h != "server" {
			out[h] = srv.Config()
		}
	}
	return out
}

// SPKIs are the servers' public key pins, for Chromium.
func (s Servers) SPKIs() []string {
	var out []string
	for _, srv := range s {
		out = append(out, srv.SPKI())
	}
	slices.Sort(out)
	return out
}

// CertPEM is every server's certificate, for a client's trust.
func (s Servers) CertPEM() []byte {
	var b strings.Builder
	for _, h := range slices.Sorted(maps.Keys(s)) {
		b.Write(s[h].CertPEM())
	}
	return []byte(b.String())
}

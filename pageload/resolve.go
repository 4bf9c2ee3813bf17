package pageload

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/transport"
)

// DNS resolves over one of doxlab's DNS transports (DoUDP, DoT, DoH,
// DoQ, a stub on 127.0.0.1, ...), keeping the transport's connection as
// it was configured to. Each lookup's record is the transport's record.
type DNS struct {
	Name      string // the transport's name in lookups: udp, doh2, doq ...
	Transport transport.Transport
}

// Resolve asks for the host's A records.
func (d *DNS) Resolve(ctx context.Context, host string) ([]netip.Addr, *Lookup, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(host), dns.TypeA)
	rec, err := d.Transport.Exchange(ctx, q)
	lk := &Lookup{Transport: d.Name, Record: rec}
	if err != nil {
		return nil, lk, err
	}
	if rec.Response == nil || rec.Response.Rcode != dns.RcodeSuccess {
		return nil, lk, fmt.Errorf("looking up %s: %s", host, rec.Rcode)
	}
	return answerAddrs(rec.Response), lk, nil
}

// Hosts resolves from a fixed table, as curl's --resolve does: no DNS.
type Hosts map[string]netip.Addr

// Resolve returns the table's address for host.
func (h Hosts) Resolve(_ context.Context, host string) ([]netip.Addr, *Lookup, error) {
	lk := &Lookup{Transport: "hosts"}
	a, ok := h[host]
	if !ok {
		return nil, lk, fmt.Errorf("%s is not in the hosts table", host)
	}
	return []netip.Addr{a}, lk, nil
}

// System resolves with the system's resolver (resolv.conf, hosts): what
// a browser without its own DNS settings does.
type System struct{}

// Resolve looks host up as the system would.
func (System) Resolve(ctx context.Context, host string) ([]netip.Addr, *Lookup, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	return addrs, &Lookup{Transport: "system"}, err
}

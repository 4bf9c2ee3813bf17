package pageload

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/ech"
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
	return resolveVia(ctx, host, d, false)
}

// Exchange asks q over the transport; the record is the transport's.
func (d *DNS) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, any, error) {
	rec, err := d.Transport.Exchange(ctx, q)
	if err == nil && rec.Response == nil {
		err = fmt.Errorf("no answer: %s", rec.Status)
	}
	if err != nil {
		return nil, rec, err
	}
	return rec.Response, rec, nil
}

// Label is the transport's name in lookups.
func (d *DNS) Label() string { return d.Name }

// Exchanger is a Resolver that can ask any question: with
// Config.HTTPSRecords the loader asks it for HTTPS records itself.
type Exchanger interface {
	// Exchange asks q; record is what the lookup's record keeps of it.
	Exchange(ctx context.Context, q *dns.Msg) (r *dns.Msg, record any, err error)
	// Label names the DNS transport in lookups.
	Label() string
}

// HTTPSInfo is what a host's HTTPS record (RFC 9460) said.
type HTTPSInfo struct {
	ALPN  []string `json:"alpn,omitempty"`
	Hints []string `json:"ipv4hint,omitempty"`
	// UsedHints: the hints were the addresses, and no A lookup was made.
	UsedHints bool `json:"used_hints"`
	// ECH is the record's ECHConfigList (ech=), which the loader uses on
	// the host's connections; ECHPublicName is its first config's outer
	// name.
	ECH           []byte `json:"ech,omitempty"`
	ECHPublicName string `json:"ech_public_name,omitempty"`
}

// h3 says whether the record offers HTTP/3.
func (h *HTTPSInfo) h3() bool { return h != nil && slices.Contains(h.ALPN, "h3") }

// resolveVia looks host up with ex: with https, the HTTPS record first,
// whose IPv4 hints, when it offers HTTP/3, spare the A lookup (RFC 9460
// §7.3); otherwise, or when the record is missing or says less, the A
// records.
func resolveVia(ctx context.Context, host string, ex Exchanger, https bool) ([]netip.Addr, *Lookup, error) {
	lk := &Lookup{Transport: ex.Label()}
	var records []any
	defer func() {
		if len(records) == 1 {
			lk.Record = records[0]
		} else {
			lk.Record = records
		}
	}()
	ask := func(t uint16) (*dns.Msg, error) {
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(host), t)
		r, rec, err := ex.Exchange(ctx, q)
		records = append(records, rec)
		if err == nil && r.Rcode != dns.RcodeSuccess {
			err = fmt.Errorf("looking up %s %s: %s", host, dns.TypeToString[t], dns.RcodeToString[r.Rcode])
		}
		return r, err
	}
	if https {
		r, err := ask(dns.TypeHTTPS)
		if err != nil && ctx.Err() != nil {
			return nil, lk, err
		}
		if err == nil {
			lk.HTTPS = httpsInfo(r)
			if lk.HTTPS.h3() && len(lk.HTTPS.Hints) > 0 {
				lk.HTTPS.UsedHints = true
				var addrs []netip.Addr
				for _, h := range lk.HTTPS.Hints {
					addrs = append(addrs, netip.MustParseAddr(h))
				}
				return addrs, lk, nil
			}
		}
	}
	r, err := ask(dns.TypeA)
	if err != nil {
		return nil, lk, err
	}
	return answerAddrs(r), lk, nil
}

// httpsInfo reads the first ServiceMode HTTPS record of an answer for
// its own name ("." target): ALPN and IPv4 hints.
func httpsInfo(r *dns.Msg) *HTTPSInfo {
	info := &HTTPSInfo{}
	for _, rr := range r.Answer {
		h, ok := rr.(*dns.HTTPS)
		if !ok || h.Priority == 0 || h.Target != "." {
			continue
		}
		for _, kv := range h.Value {
			switch v := kv.(type) {
			case *dns.SVCBAlpn:
				info.ALPN = append(info.ALPN, v.Alpn...)
			case *dns.SVCBECHConfig:
				info.ECH = v.ECH
				if cs, err := ech.Parse(v.ECH); err == nil && len(cs) > 0 {
					info.ECHPublicName = cs[0].PublicName
				}
			case *dns.SVCBIPv4Hint:
				for _, ip := range v.Hint {
					if a, ok := netip.AddrFromSlice(ip.To4()); ok {
						info.Hints = append(info.Hints, a.String())
					}
				}
			}
		}
		break
	}
	return info
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

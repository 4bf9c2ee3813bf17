package pageload

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// The coalescing modes: how a load's lookups ride on its own HTTP/3
// connection to a server that is both resolver and origin.
const (
	// CoalesceDoH3 sends each lookup as a DoH GET (RFC 8484) on the
	// connection, in 0-RTT when the connection is resumed early.
	CoalesceDoH3 = "doh3"
	// CoalesceDNSStream sends each lookup on a DNS stream of its own
	// (docs/dnsstream.md): RFC 9250 framing, no HTTP header octets.
	CoalesceDNSStream = "dnsstream"
)

// Coalesce puts a load's name resolution on the page's connection. The
// load's first connection goes to Server, verified for Name, and every
// lookup is made on it; an origin that resolves to Server's address and
// that its certificate covers is then fetched on the same connection
// (pooled, as browsers do), so a single-origin page served by its
// resolver costs one QUIC handshake in all.
type Coalesce struct {
	Mode   string         // CoalesceDoH3 or CoalesceDNSStream
	Server netip.AddrPort // the resolver's address
	Name   string         // its name, for TLS and DoH's :authority
	Path   string         // the DoH path; default /dns-query
	// ECHConfigList, if set, is the resolver's ECH config (its HTTPS
	// record's ech=, RFC 9848), known before the load as a browser
	// remembers one from an earlier visit: the connection is opened
	// before any lookup, so no record of this load can give it. The
	// connection offers it (outer name the config's public name; Name
	// inside), retrying with the server's retry configs when it is stale.
	ECHConfigList []byte
}

// Transport is the name lookups made this way carry.
func (c *Coalesce) Transport() string {
	if c.Mode == CoalesceDoH3 {
		return "doh3-coalesced"
	}
	return c.Mode
}

func (c *Coalesce) check(protocol string) error {
	if c == nil {
		return nil
	}
	if c.Mode != CoalesceDoH3 && c.Mode != CoalesceDNSStream {
		return fmt.Errorf("coalescing mode %q: want %s or %s", c.Mode, CoalesceDoH3, CoalesceDNSStream)
	}
	if protocol != "h3" {
		return fmt.Errorf("coalescing needs h3: DNS and the page share a QUIC connection")
	}
	if !c.Server.IsValid() || c.Name == "" {
		return fmt.Errorf("coalescing needs the resolver's address and name")
	}
	if c.Path == "" {
		c.Path = "/dns-query"
	}
	return nil
}

// resolveOnConn looks host up on the resolver's connection, opening it
// for the first lookup of the load.
func (ld *load) resolveOnConn(ctx context.Context, host string) ([]netip.Addr, *Lookup, error) {
	co := ld.l.cfg.Coalesce
	lk := &Lookup{Transport: co.Transport(), Coalesced: true}
	origin := net.JoinHostPort(co.Name, strconv.Itoa(int(co.Server.Port())))
	// Keyed apart from the origin's own entry: when the page's host is the
	// resolver's name, its connection is being dialled, waiting for this.
	c, err := ld.conns.get(ctx, "dns "+origin, func() *originConn {
		return ld.open(ctx, co.Name, origin, co.Server, "h3", ld.l.cfg.ZeroRTT, co.ECHConfigList)
	})
	if err == nil {
		err = c.err
	}
	if err != nil {
		return nil, lk, err
	}
	// Waiting for SETTINGS on a 0-RTT connection can end in the server's
	// rejection of it, as a request can (loader.go, ask): go on with the
	// connection that replaces it.
	if err := ld.settled(ctx, c); err != nil {
		if !c.rejected(err) {
			return nil, lk, err
		}
		if c = ld.successor(ctx, c); c.err != nil {
			return nil, lk, c.err
		}
		if err := ld.settled(ctx, c); err != nil {
			return nil, lk, err
		}
	}
	c = c.current() // a rejected 0-RTT replaced it
	return ld.raceOrigin(ctx, c, host, func(ctx context.Context) ([]netip.Addr, *Lookup, error) {
		early := !handshakeDone(c.qc)
		x := &connExchanger{ld: ld, c: c}
		addrs, lk, err := resolveVia(ctx, host, x, ld.l.cfg.HTTPSRecords)
		lk.Coalesced, lk.Conn, lk.Early = true, x.c.index, early && x.c == c
		return addrs, lk, err
	})
}

// connExchanger asks a lookup's questions on a coalesced connection, c,
// or on the one that replaced it when the server rejected c's 0-RTT.
type connExchanger struct {
	ld *load
	c  *originConn
}

func (x *connExchanger) Label() string { return x.ld.l.cfg.Coalesce.Transport() }

func (x *connExchanger) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, any, error) {
	q.Id = 0 // RFC 8484 §4.1 and RFC 9250 §4.2.1: cache-friendly, the stream is the ID
	x.c = x.c.current()
	r, err := x.ask(ctx, q)
	// As the page's requests do (fetch): asked again on the connection
	// that follows, which a request of the page may have dialled already.
	if x.c.rejected(err) {
		next := x.ld.successor(ctx, x.c)
		if next.err != nil {
			return nil, nil, next.err
		}
		x.c = next
		r, err = x.ask(ctx, q)
	}
	if err != nil {
		return nil, nil, err
	}
	return r, coalescedRecord{Type: dns.TypeToString[q.Question[0].Qtype], Rcode: dns.RcodeToString[r.Rcode], Answers: len(r.Answer)}, nil
}

func (x *connExchanger) ask(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	x.ld.mu.Lock()
	x.ld.res.Conns[x.c.index].DNSQueries++
	x.ld.mu.Unlock()
	if x.ld.l.cfg.Coalesce.Mode == CoalesceDoH3 {
		return x.ld.dohOn(ctx, x.c, q)
	}
	return x.ld.dnsStreamOn(ctx, x.c, q)
}

// coalescedRecord is what a coalesced lookup records of its answer; the
// connection's facts are the load's Conn.
type coalescedRecord struct {
	Type    string `json:"type"`
	Rcode   string `json:"rcode"`
	Answers int    `json:"answers"`
}

// dohOn makes one DoH GET on c: GET so that it may go in 0-RTT.
func (ld *load) dohOn(ctx context.Context, c *originConn, q *dns.Msg) (*dns.Msg, error) {
	co := ld.l.cfg.Coalesce
	wire, err := q.Pack()
	if err != nil {
		return nil, err
	}
	target := "https://" + net.JoinHostPort(co.Name, strconv.Itoa(int(co.Server.Port()))) + co.Path
	req, err := dnswire.NewDoHRequest(ctx, target, "get", false, wire, q)
	if err != nil {
		return nil, err
	}
	req.Method = c.method()
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := dnswire.ReadBody(resp.Body)
	if err != nil {
		return nil, err
	}
	return dnswire.DecodeDoHResponse(resp.StatusCode, resp.Header.Get("Content-Type"), body, false, q)
}

// dnsStreamOn makes one exchange on a DNS stream of c, once the server's
// SETTINGS (remembered, for a 0-RTT connection) say it takes them.
func (ld *load) dnsStreamOn(ctx context.Context, c *originConn, q *dns.Msg) (*dns.Msg, error) {
	if err := ld.offersDNSStream(ctx, c); err != nil {
		return nil, err
	}
	wire, err := q.Pack()
	if err != nil {
		return nil, err
	}
	out, err := dnswire.AppendDNSStreamQuery(nil, wire)
	if err != nil {
		return nil, err
	}
	str, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { str.CancelRead(0x10c); str.CancelWrite(0x10c) }) // H3_REQUEST_CANCELLED
	defer stop()
	if _, err := str.Write(out); err != nil {
		return nil, err
	}
	str.Close()
	in, err := dnswire.ReadPrefixed(str)
	if err != nil {
		return nil, fmt.Errorf("reading the DNS stream's answer: %w", err)
	}
	if n, _ := str.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("the DNS stream carries more than one answer")
	}
	r, err := dnswire.Unpack(in)
	if err != nil {
		return nil, err
	}
	if r.Id != q.Id || len(r.Question) != 1 || r.Question[0] != q.Question[0] {
		return nil, fmt.Errorf("the DNS stream's answer is not for %s", q.Question[0].Name)
	}
	return r, nil
}

// offersDNSStream says whether the server takes DNS streams: from the
// SETTINGS remembered with the ticket while a 0-RTT handshake is under
// way (RFC 9114 §7.2.4.2), else from the server's SETTINGS, waited for.
func (ld *load) offersDNSStream(ctx context.Context, c *originConn) error {
	settings := map[uint64]uint64(nil)
	if !ld.l.cfg.WaitSettings && !handshakeDone(c.qc) {
		ld.l.mu.Lock()
		settings = ld.l.settings[c.name]
		ld.l.mu.Unlock()
	}
	if settings == nil {
		if err := c.awaitSettings(ctx); err != nil {
			return err
		}
		settings = c.settings
	}
	if settings[dnswire.DNSStreamSetting] != 1 {
		return fmt.Errorf("%s does not offer DNS streams (no SETTINGS 0x%x = 1)", c.remote, dnswire.DNSStreamSetting)
	}
	return nil
}

// answerAddrs are the IPv4 addresses an answer gives.
func answerAddrs(r *dns.Msg) []netip.Addr {
	var addrs []netip.Addr
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
				addrs = append(addrs, ip)
			}
		}
	}
	return addrs
}

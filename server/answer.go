package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/odoh"
	"github.com/doxlab/doxlab/transport"
)

// answerer answers queries from, in order: static records, a hosts file
// and a zone file (one record set), a constant address for any name, and
// forwarding to an upstream with an optional cache.
type answerer struct {
	records map[string][]dns.RR // by canonical owner name
	zones   []*dns.SOA          // origins we are authoritative for
	any     net.IP
	anyTTL  uint32
	fwd     transport.Transport
	// fwdTCP asks the same upstream over TCP, where fwd is UDP: a client
	// that came over a stream gets, for an answer truncated over UDP,
	// the whole answer, as it would asking the upstream itself.
	fwdTCP  transport.Transport
	fwdSlot chan struct{} // one per forwarded query in flight
	budget  int64         // queries forwarded in the server's life, at most; 0: no bound
	spent   atomic.Int64
	cache   *cache
	local   bool // static records or hosts: unknown names are NXDOMAIN, not REFUSED
	refuse  func(netip.Addr) error
	ech     func() []byte // the web listener's current ECHConfigList, with web.ech
	odoh    []byte        // the ODoH target's ObliviousDoHConfigs, with odoh.target
}

func newAnswerer(c *Answers) (*answerer, error) {
	a := &answerer{records: map[string][]dns.RR{}, anyTTL: c.AnyTTL}
	for i, s := range c.Static {
		rr, err := dns.NewRR(s)
		if err != nil || rr == nil {
			return nil, fmt.Errorf("answers.static[%d]: %q: %w", i, s, err)
		}
		a.add(rr)
		a.local = true
	}
	if c.Hosts != "" {
		if err := a.loadHosts(c.Hosts); err != nil {
			return nil, err
		}
		a.local = true
	}
	if c.Zone != "" {
		if err := a.loadZone(c.Zone, c.Origin); err != nil {
			return nil, err
		}
	}
	if c.Any != "" {
		a.any = net.ParseIP(c.Any)
	}
	if c.Forward != "" {
		opts := transport.Options{Reuse: true, Timeout: c.ForwardTimeout, SNI: c.ForwardSNI, Insecure: c.ForwardInsecure}
		if cond, ok := transport.Conditions[c.ForwardConn]; ok {
			cond.Apply(&opts)
		}
		opts.RootCAs, opts.Refuse, opts.OpenSockets = c.ForwardRoots, c.ForwardRefuse, c.ForwardOpenSockets
		a.refuse = c.ForwardRefuse
		if c.ForwardCA != "" {
			pool, err := transport.LoadCA(c.ForwardCA)
			if err != nil {
				return nil, fmt.Errorf("answers.forward_ca: %w", err)
			}
			opts.RootCAs = pool
		}
		a.fwdSlot = make(chan struct{}, max(1, c.ForwardMaxInFlight))
		a.budget = int64(c.ForwardBudget)
		t, err := transport.New(c.Forward, opts)
		if err != nil {
			return nil, fmt.Errorf("answers.forward: %w", err)
		}
		a.fwd = t
		if ep, err := transport.ParseURL(c.Forward); err == nil && ep.Scheme == "udp" {
			if a.fwdTCP, err = transport.New("tcp://"+ep.HostPort(), opts); err != nil {
				return nil, fmt.Errorf("answers.forward: %w", err)
			}
		}
		if c.Cache {
			a.cache = &cache{m: map[cacheKey]cacheEntry{}}
		}
	}
	return a, nil
}

func (a *answerer) add(rr dns.RR) {
	name := dns.CanonicalName(rr.Header().Name)
	a.records[name] = append(a.records[name], rr)
}

func (a *answerer) loadHosts(path string) error {
	err := listfile.Each(path, func(_ int, line string) error {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return nil
		}
		ip := net.ParseIP(fields[0])
		if ip == nil {
			return fmt.Errorf("%q is not an address", fields[0])
		}
		for _, name := range fields[1:] {
			hdr := dns.RR_Header{Name: dns.Fqdn(name), Class: dns.ClassINET, Ttl: 300}
			if ip4 := ip.To4(); ip4 != nil {
				hdr.Rrtype = dns.TypeA
				a.add(&dns.A{Hdr: hdr, A: ip4})
			} else {
				hdr.Rrtype = dns.TypeAAAA
				a.add(&dns.AAAA{Hdr: hdr, AAAA: ip})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("answers.hosts: %w", err)
	}
	return nil
}

func (a *answerer) loadZone(path, origin string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("answers.zone: %w", err)
	}
	defer f.Close()
	zp := dns.NewZoneParser(f, dns.Fqdn(origin), path)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if soa, isSOA := rr.(*dns.SOA); isSOA {
			a.zones = append(a.zones, soa)
		}
		a.add(rr)
	}
	if err := zp.Err(); err != nil {
		return fmt.Errorf("answers.zone: %w", err)
	}
	return nil
}

// zoneOf returns the SOA of the zone name lies in, or nil.
func (a *answerer) zoneOf(name string) *dns.SOA {
	for _, soa := range a.zones {
		if dns.IsSubDomain(soa.Hdr.Name, name) {
			return soa
		}
	}
	return nil
}

// answer builds the response to q (with q's ID; the caller frames it).
// A forwarded query also returns the upstream exchange's record; why
// says when the answer is a refusal of the server's own (a SERVFAIL past
// the forwarder's bound).
func (a *answerer) answer(ctx context.Context, q *dns.Msg) (r *dns.Msg, up *transport.Record, why Reason) {
	r = new(dns.Msg)
	r.SetReply(q)
	if rcode, ok := ednsRcode(q, fromStream(ctx)); !ok {
		r.Rcode = rcode
		if rcode == dns.RcodeBadVers { // said in an OPT of the version this server speaks
			r.SetEdns0(maxUDPSize, false)
		}
		return r, nil, ""
	}
	if q.Opcode != dns.OpcodeQuery || len(q.Question) != 1 {
		r.Rcode = dns.RcodeNotImplemented
		if len(q.Question) != 1 {
			r.Rcode = dns.RcodeFormatError
		}
		return r, nil, ""
	}
	qq := q.Question[0]
	name := dns.CanonicalName(qq.Name)
	if qq.Qclass != dns.ClassINET && qq.Qclass != dns.ClassANY {
		// This server's data are of class IN: a question of another
		// class (CH's version.bind, id.server) is an upstream's to
		// answer, or refused.
		if a.fwd != nil {
			return a.forward(ctx, q)
		}
		r.Rcode = dns.RcodeRefused
		return r, nil, ""
	}
	if rrs, ok := a.records[name]; ok {
		r.Authoritative = true
		// A CNAME whose target is in our data is followed, as RFC 1034
		// §4.3.2 has an authoritative server do, so that a CDN customer's
		// alias comes with the CDN's addresses in one answer. Eight
		// links at most, and a loop ends where it closes.
		seen := map[string]bool{name: true}
		for hop := 0; ; hop++ {
			next := ""
			for _, rr := range rrs {
				t := rr.Header().Rrtype
				if t == qq.Qtype || qq.Qtype == dns.TypeANY || (t == dns.TypeCNAME && qq.Qtype != dns.TypeCNAME) {
					r.Answer = append(r.Answer, rr)
				}
				if c, ok := rr.(*dns.CNAME); ok && qq.Qtype != dns.TypeCNAME && qq.Qtype != dns.TypeANY {
					next = dns.CanonicalName(c.Target)
				}
			}
			if next == "" || seen[next] || hop == 8 {
				break
			}
			if rrs, ok = a.records[next]; !ok {
				break
			}
			seen[next], name = true, next
		}
		if len(r.Answer) == 0 {
			if soa := a.zoneOf(name); soa != nil {
				r.Ns = []dns.RR{soa}
			}
		}
		r.Extra = append(r.Extra, a.targetAddresses(r.Answer)...)
		withOwnParams(r.Answer, a.ownParams)
		return r, nil, ""
	}
	if soa := a.zoneOf(name); soa != nil {
		r.Authoritative, r.Rcode, r.Ns = true, dns.RcodeNameError, []dns.RR{soa}
		return r, nil, ""
	}
	if a.any != nil {
		hdr := dns.RR_Header{Name: qq.Name, Class: dns.ClassINET, Ttl: a.anyTTL}
		switch ip4 := a.any.To4(); {
		case qq.Qtype == dns.TypeA && ip4 != nil:
			hdr.Rrtype = dns.TypeA
			r.Answer = []dns.RR{&dns.A{Hdr: hdr, A: ip4}}
		case qq.Qtype == dns.TypeAAAA && ip4 == nil:
			hdr.Rrtype = dns.TypeAAAA
			r.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: a.any}}
		}
		r.Authoritative = true
		return r, nil, ""
	}
	if a.fwd != nil {
		return a.forward(ctx, q)
	}
	if a.local {
		r.Rcode = dns.RcodeNameError
	} else {
		r.Rcode = dns.RcodeRefused
	}
	return r, nil, ""
}

// targetAddresses are the A and AAAA records of the targets of the
// HTTPS and SVCB records in answer that are in our data, for the
// Additional section (RFC 9460 §4.2): a client reaches the service
// without another lookup. A target of "." in ServiceMode is the record's
// own name (§2.5.2); each name's addresses come once.
func (a *answerer) targetAddresses(answer []dns.RR) []dns.RR {
	var extra []dns.RR
	seen := map[string]bool{}
	// An AliasMode record's in-zone target brings its own RRset of the
	// same type, whose targets bring theirs (RFC 9460 §4.2), a few steps
	// at most.
	for step, rrs := 0, answer; step < 4 && len(rrs) > 0; step++ {
		var next []dns.RR
		for _, rr := range rrs {
			var target string
			var alias bool
			rtype := rr.Header().Rrtype
			switch s := rr.(type) {
			case *dns.HTTPS:
				target, alias = s.Target, s.Priority == 0
			case *dns.SVCB:
				target, alias = s.Target, s.Priority == 0
			default:
				continue
			}
			if target == "." {
				if alias {
					continue // AliasMode with "." says the service is not there
				}
				target = rr.Header().Name
			}
			target = dns.CanonicalName(target)
			if seen[target] {
				continue
			}
			seen[target] = true
			for _, t := range a.records[target] {
				switch rt := t.Header().Rrtype; {
				case rt == dns.TypeA || rt == dns.TypeAAAA:
					extra = append(extra, t)
				case alias && rt == rtype && target != dns.CanonicalName(rr.Header().Name):
					extra, next = append(extra, t), append(next, t)
				}
			}
		}
		rrs = next
	}
	return extra
}

// Close closes the forwarder's connections to its upstream.
func (a *answerer) Close() error {
	err := a.fwd.Close()
	if a.fwdTCP != nil {
		err = errors.Join(err, a.fwdTCP.Close())
	}
	return err
}

// streamClient marks a context whose query came over a stream (TCP,
// DoT, DoH, DoQ), not UDP.
type streamClient struct{}

// fromStream says whether ctx's query came over a stream.
func fromStream(ctx context.Context) bool { return ctx.Value(streamClient{}) != nil }

// ednsRcode checks q's EDNS(0) (RFC 6891 §6.1.1, §6.1.3, RFC 7828
// §3.2.1): more than one OPT record, or edns-tcp-keepalive from a client
// not on a stream, is FORMERR, a version past 0 BADVERS; ok when none.
func ednsRcode(q *dns.Msg, stream bool) (rcode int, ok bool) {
	if !stream && keepaliveOption(q) {
		return dns.RcodeFormatError, false
	}
	var opt *dns.OPT
	for _, rr := range q.Extra {
		if o, is := rr.(*dns.OPT); is {
			if opt != nil {
				return dns.RcodeFormatError, false
			}
			opt = o
		}
	}
	if opt != nil && opt.Version() != 0 {
		return dns.RcodeBadVers, false
	}
	return 0, true
}

// forward answers q from the cache or the upstream; past the bound on
// queries in flight upstream, SERVFAIL at once, and past the budget,
// REFUSED.
func (a *answerer) forward(ctx context.Context, q *dns.Msg) (*dns.Msg, *transport.Record, Reason) {
	key := cacheKeyOf(q)
	if a.cache != nil {
		if m := a.cache.get(key, q); m != nil {
			return m, nil, ""
		}
	}
	answer := func(rcode int) *dns.Msg {
		r := new(dns.Msg)
		r.SetRcode(q, rcode)
		return r
	}
	servfail := func() *dns.Msg { return answer(dns.RcodeServerFailure) }
	if a.budget > 0 && a.spent.Add(1) > a.budget {
		return answer(dns.RcodeRefused), nil, ReasonForwardBudget
	}
	select {
	case a.fwdSlot <- struct{}{}:
		defer func() { <-a.fwdSlot }()
	default:
		return servfail(), nil, ReasonForwardLimit
	}
	rec, err := a.fwd.Exchange(ctx, q)
	if err == nil && rec.Status == transport.StatusTruncated && a.fwdTCP != nil && fromStream(ctx) {
		// RFC 7766 §5: a truncated answer is asked for again over TCP,
		// as the client, asking over a stream, cannot itself; a client
		// over UDP gets the TC bit and retries to us over TCP.
		rec, err = a.fwdTCP.Exchange(ctx, q)
	}
	if err != nil {
		return servfail(), rec, ""
	}
	r := rec.Response
	r.Id = q.Id
	if a.refuse != nil && refusedAddress(r.Answer, a.refuse) {
		return answer(dns.RcodeRefused), rec, ReasonBlocked
	}
	if a.cache != nil {
		a.cache.put(key, r)
	}
	return r, rec, ""
}

// refusedAddress says whether an answer holds an address refuse refuses:
// in an A or AAAA record, or in an HTTPS or SVCB record's address hints,
// which a client may connect to before its A and AAAA answers come.
func refusedAddress(answer []dns.RR, refuse func(netip.Addr) error) bool {
	for _, rr := range answer {
		var ips []net.IP
		switch r := rr.(type) {
		case *dns.A:
			ips = []net.IP{r.A}
		case *dns.AAAA:
			ips = []net.IP{r.AAAA}
		case *dns.HTTPS:
			ips = hints(r.Value)
		case *dns.SVCB:
			ips = hints(r.Value)
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok && refuse(a.Unmap()) != nil {
				return true
			}
		}
	}
	return false
}

// hints are the addresses of an SVCB or HTTPS record's ipv4hint and
// ipv6hint parameters.
func hints(kv []dns.SVCBKeyValue) []net.IP {
	var out []net.IP
	for _, p := range kv {
		switch h := p.(type) {
		case *dns.SVCBIPv4Hint:
			out = append(out, h.Hint...)
		case *dns.SVCBIPv6Hint:
			out = append(out, h.Hint...)
		}
	}
	return out
}

type cacheKey struct {
	name       string
	qtype, cls uint16
	do, cd     bool
}

func cacheKeyOf(q *dns.Msg) cacheKey {
	qq := q.Question[0]
	k := cacheKey{name: dns.CanonicalName(qq.Name), qtype: qq.Qtype, cls: qq.Qclass, cd: q.CheckingDisabled}
	if o := q.IsEdns0(); o != nil {
		k.do = o.Do()
	}
	return k
}

type cacheEntry struct {
	msg     *dns.Msg
	kept    time.Time
	expires time.Time
}

// cache keeps forwarded answers for their smallest TTL (negative answers
// for the SOA minimum), at most 5 minutes, and serves them as a
// resolver does: to the question as asked, their TTLs less the whole
// seconds they were held (RFC 1035 §7.3).
type cache struct {
	mu sync.Mutex
	m  map[cacheKey]cacheEntry
}

func (c *cache) get(k cacheKey, q *dns.Msg) *dns.Msg {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	now := time.Now()
	if !ok || now.After(e.expires) {
		return nil
	}
	m := e.msg.Copy()
	m.Id, m.Question = q.Id, slices.Clone(q.Question) // a client using 0x20 compares the case
	held := uint32(now.Sub(e.kept) / time.Second)
	for _, rrs := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range rrs {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl -= min(h.Ttl, held)
			}
		}
	}
	return m
}

func (c *cache) put(k cacheKey, m *dns.Msg) {
	if m.Truncated {
		return // a client retries over TCP: not to be given this again
	}
	ttl := uint32(300)
	for _, rr := range append(append([]dns.RR{}, m.Answer...), m.Ns...) {
		t := rr.Header().Ttl
		if soa, ok := rr.(*dns.SOA); ok && soa.Minttl < t {
			t = soa.Minttl
		}
		if t < ttl {
			ttl = t
		}
	}
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError || ttl == 0 {
		return
	}
	c.mu.Lock()
	if len(c.m) > 100000 {
		c.m = map[cacheKey]cacheEntry{} // crude bound; an experiment cache, not a resolver's
	}
	now := time.Now()
	c.m[k] = cacheEntry{msg: m.Copy(), kept: now, expires: now.Add(time.Duration(ttl) * time.Second)}
	c.mu.Unlock()
}

// ownParams are the SvcParams this server's own HTTPS records carry
// beside those its data gives: the web listener's current ECH config
// (ech=, RFC 9848) and the ODoH target's configs (odoh.SvcParamKey).
func (a *answerer) ownParams() []dns.SVCBKeyValue {
	var kvs []dns.SVCBKeyValue
	if a.ech != nil {
		kvs = append(kvs, &dns.SVCBECHConfig{ECH: a.ech()})
	}
	if a.odoh != nil {
		kvs = append(kvs, odoh.Param(a.odoh))
	}
	return kvs
}

// withOwnParams adds each of params' SvcParams to every ServiceMode
// HTTPS record of answer that lacks its key: the records describe this
// server's own services. params is asked only when there is such a
// record (most answers have none: nothing to allocate on the hot path).
// answer is the reply's own slice; the records it points to are the
// server's data, so changed ones are copies.
func withOwnParams(answer []dns.RR, params func() []dns.SVCBKeyValue) {
	var kvs []dns.SVCBKeyValue
	for i, rr := range answer {
		h, ok := rr.(*dns.HTTPS)
		if !ok || h.Priority == 0 {
			continue
		}
		if kvs == nil {
			if kvs = params(); len(kvs) == 0 {
				return
			}
		}
		var c *dns.HTTPS
		for _, kv := range kvs {
			if hasKey(h.Value, kv.Key()) {
				continue
			}
			if c == nil {
				c = dns.Copy(h).(*dns.HTTPS)
			}
			c.Value = append(c.Value, kv)
		}
		if c != nil {
			answer[i] = c
		}
	}
}

func hasKey(kvs []dns.SVCBKeyValue, key dns.SVCBKey) bool {
	for _, v := range kvs {
		if v.Key() == key {
			return true
		}
	}
	return false
}

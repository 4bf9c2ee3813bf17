package pages

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unique"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
)

// Task is one page load of the web experiment: a page over HTTP/3 (with
// 0-RTT or 1-RTT) while the browser's DNS goes through the stub over one
// transport, on one access profile.
type Task struct {
	Profile   string `json:"profile"`
	Page      string `json:"page"`
	Transport string `json:"transport"`  // the stub's upstream: udp, tcp, dot, doh2, doh3, doq
	StubState string `json:"stub_state"` // cold (a new connection per query) or warm (kept from the warm-up)
	H3        string `json:"h3"`         // 0rtt or 1rtt: whether the browser kept its ticket from the warm-up; empty: whatever the page speaks (a campaign's real pages)
	DNSMode   string `json:"dns_mode"`   // stub (DNS in the browser's path) or decoupled (measured apart and added, as the paper did)
	// Engine loads the page: "" or chromium (the browser), or doxlab
	// (doxlab's page loader replaying the page's graph, package pageload).
	Engine string `json:"engine,omitempty"`
	// Setup is where a multi-origin page's origins were served and what
	// the servers sent, when not the papers' (a server per party, ORIGIN
	// frames no certificate lets a browser use): cdn+origins (one CDN
	// edge, one certificate, ORIGIN frames) or cdn (the same, no frames).
	Setup string `json:"setup,omitempty"`
	Rep   int    `json:"rep"`
}

// Engines that load pages.
const (
	EngineChromium = "chromium"
	EngineDoxlab   = "doxlab"
)

// EngineName is the task's engine, chromium when unset.
func (t Task) EngineName() string {
	if t.Engine == "" {
		return EngineChromium
	}
	return t.Engine
}

// Key names the task within a run, for resuming. Chromium's tasks keep
// the key they had before there were engines.
func (t Task) Key() string {
	k := []string{t.Profile, t.Page, t.Transport, t.StubState, t.H3, t.DNSMode, fmt.Sprint(t.Rep)}
	if t.EngineName() != EngineChromium {
		k = append(k, t.Engine)
	}
	return strings.Join(k, "|")
}

// Sample is one measured page load with what really happened on each
// layer: the browser's timings, the stub's DNS records and the server's
// record of the HTTP/3 connection.
type Sample struct {
	Task
	Start  time.Time `json:"start"`
	Status string    `json:"status"` // ok, or why the sample failed: timeout, error, not-h3, dns-bypassed
	Error  string    `json:"error,omitempty"`

	Load   *browser.Load `json:"load"`
	WarmUp *browser.Load `json:"warm_up,omitempty"`
	// Replay is doxlab's page loader's own record of the load (engine
	// doxlab); Load then holds its totals in the browser's terms.
	Replay *pageload.Result `json:"replay,omitempty"`
	// Graph is the browser's load as a dependency graph, where it was
	// traced for the doxlab engine to replay (its graph is chosen among
	// the browser's measured loads of the page on the profile).
	Graph *pageload.Graph `json:"graph,omitempty"`

	// PLTMs is the page load time: the browser's loadEventEnd in stub
	// mode; in decoupled mode loadEventEnd plus the DNS time measured
	// apart, as the cross-layer paper summed them. FCPMs likewise.
	PLTMs float64 `json:"plt_ms"`
	FCPMs float64 `json:"fcp_ms"`

	// DNSMs is the stub's time for the page's lookups during the
	// navigation: from its first query read to its last answer written
	// (the browser asks A and HTTPS, sometimes AAAA, at once).
	DNSMs    float64          `json:"dns_ms"`
	DNS      []*server.Record `json:"dns"`                 // the stub's records for the page's host name
	Ignored  int              `json:"background_lookups"`  // the browser's own lookups of other names, left out
	DNSFacts *DNSFacts        `json:"dns_facts,omitempty"` // the upstream connection of the first query

	// ServerQueries counts the page host's queries that reached the
	// server, by transport: proof of the path the browser's DNS took.
	ServerQueries map[string]int `json:"server_queries,omitempty"`

	// The page's lookups and connections, over all its origins (a
	// one-origin page has one name): the names the stub resolved during
	// the load, those a request had to wait for (its lookup wait in
	// resource timing was not zero: on the critical path of that
	// request) and the sum of those waits, beside the stub's time per
	// name summed; and the servers' web connections per origin (SNI).
	Lookups         int            `json:"lookups"`
	LookupsBlocking int            `json:"lookups_blocking"`
	DNSBlockingMs   float64        `json:"dns_blocking_ms"`
	DNSTotalMs      float64        `json:"dns_total_ms"`
	ConnsPerOrigin  map[string]int `json:"conns_per_origin,omitempty"`

	// H3 is the server's record of the browser's QUIC connection (to the
	// page's own host, on a multi-origin page).
	H3Conns    int            `json:"h3_conns"`
	H3Conn     *server.Record `json:"h3_conn,omitempty"`
	H3Used0RTT bool           `json:"h3_0rtt"`
	H3Resumed  bool           `json:"h3_resumed"`
	// h3Token is H3Conn's TokenUsed, and conns the sum of ConnsPerOrigin,
	// where analysis decoded neither (DecodeForAnalysis): H3TokenUsed and
	// WebConns read either.
	h3Token bool
	conns   int

	// Origins says, per origin the load touched, what happened: so that a
	// multi-origin page's third party over h2, or a name the stub never
	// saw, is on the record rather than hidden in the page's totals.
	Origins []OriginFacts `json:"origins,omitempty"`
}

// OriginFacts is what one origin of a page did during a load.
type OriginFacts struct {
	Host     string `json:"host"`
	Requests int    `json:"requests"` // resources fetched from it, the document included
	// Protocol is what they came over (nextHopProtocol): h3, h2,
	// http/1.1, several joined by "+"; empty if none said.
	Protocol string `json:"protocol"`
	// Lookup is how its name was resolved: "upstream" (through the stub,
	// which asked the resolver), "stub-cache" (the stub answered from its
	// cache), or "none" (no query reached the stub during the load: the
	// browser's own cache, or a connection pooled from another origin).
	Lookup string `json:"lookup"`
	// Announced: a connection of the page announced the origin in an
	// ORIGIN frame (RFC 9412), so a browser could request it there with
	// no lookup and no connection of its own.
	Announced bool `json:"announced,omitempty"`
	Conns     int  `json:"conns"`         // web connections the servers saw for it (by SNI)
	Conns0RTT int  `json:"conns_0rtt"`    // of those, with 0-RTT accepted
	Resumed   int  `json:"conns_resumed"` // of those, resumed
}

// Lookup labels of OriginFacts.
const (
	LookupUpstream  = "upstream"
	LookupStubCache = "stub-cache"
	LookupNone      = "none"
)

// H3 reports whether everything from the origin came over HTTP/3.
func (o OriginFacts) H3() bool { return o.Protocol == "h3" }

// H3TokenUsed says whether the page's HTTP/3 connection was validated
// by a NEW_TOKEN token.
func (s *Sample) H3TokenUsed() bool { return s.h3Token || (s.H3Conn != nil && s.H3Conn.TokenUsed) }

// WebConns is the servers' web connections of the load, over its origins.
func (s *Sample) WebConns() int {
	n := s.conns
	for _, c := range s.ConnsPerOrigin {
		n += c
	}
	return n
}

// OriginsByFrame counts the origins a load requested with no lookup on a
// connection that had announced them in an ORIGIN frame: the lookups the
// frame spared.
func (s *Sample) OriginsByFrame() (n int) {
	for _, o := range s.Origins {
		if o.Requests > 0 && o.Lookup == LookupNone && o.Announced {
			n++
		}
	}
	return n
}

// OriginCounts sums a load's OriginFacts: the origins requested not
// wholly over HTTP/3, those requested with no lookup reaching the stub,
// and the web connections, and those of them in 0-RTT.
func (s *Sample) OriginCounts() (notH3, noLookup, conns, conns0RTT int) {
	for _, o := range s.Origins {
		if o.Requests > 0 && !o.H3() {
			notH3++
		}
		if o.Requests > 0 && o.Lookup == LookupNone {
			noLookup++
		}
		conns += o.Conns
		conns0RTT += o.Conns0RTT
	}
	return
}

// DNSFacts is what the stub's upstream exchange really did.
type DNSFacts struct {
	Status      string  `json:"status"`
	TotalMs     float64 `json:"total_ms"`
	HandshakeMs float64 `json:"handshake_ms"`
	Reused      bool    `json:"reused"`
	Resumed     bool    `json:"resumed"`
	Used0RTT    bool    `json:"used_0rtt"`
	Protocol    string  `json:"protocol"`
}

// Assemble labels a measured load with the stub's and the server's
// records from its time window. hosts are the page's origins, its own
// first. stub are the stub's query records; srv are the servers' records:
// their query records, and the connection records of the web listeners.
// A connection the stub made itself (DoH to the web server) is told apart
// by its address.
func Assemble(task Task, l *browser.Load, hosts []string, stub, srv []*server.Record) *Sample {
	s := &Sample{Task: task, Start: l.Start, Load: l, Status: l.Status, Error: l.Error}
	ofPage := map[string]bool{}
	for _, h := range hosts {
		ofPage[strings.ToLower(h)] = true
	}
	name := func(q string) string { return strings.ToLower(strings.TrimSuffix(q, ".")) }
	stubAddrs := map[string]bool{}
	var first, last time.Time
	type span struct{ first, last time.Time }
	perName := map[string]*span{}
	for _, r := range stub {
		// Only the stub's DoH can reach a web listener. Its DoUDP and DoQ
		// sockets' ports are the host's ephemeral ones, as the browser's
		// QUIC sockets' are: counting them would, now and then, take a
		// page's connection for the stub's.
		if up := r.Upstream; up != nil && up.Conn.LocalAddr != "" && strings.HasPrefix(up.Protocol, "doh") {
			stubAddrs[up.Conn.LocalAddr] = true
		}
		n := name(r.QName)
		if !ofPage[n] {
			s.Ignored++
			continue
		}
		s.DNS = append(s.DNS, r)
		begin := r.Time.Add(-time.Duration(r.ServerMs * float64(time.Millisecond)))
		if first.IsZero() || begin.Before(first) {
			first = begin
		}
		if r.Time.After(last) {
			last = r.Time
		}
		sp := perName[n]
		if sp == nil {
			sp = &span{begin, r.Time}
			perName[n] = sp
		}
		sp.first, sp.last = minTime(sp.first, begin), maxTime(sp.last, r.Time)
		if up := r.Upstream; up != nil && s.DNSFacts == nil {
			s.DNSFacts = &DNSFacts{Status: string(up.Status), TotalMs: up.Timing.TotalMs, HandshakeMs: up.Timing.HandshakeMs,
				Reused: up.Conn.Reused, Resumed: up.Conn.TLSResumed, Used0RTT: up.Conn.Used0RTT, Protocol: up.Protocol}
		}
	}
	if !first.IsZero() {
		s.DNSMs = msOf(last.Sub(first))
	}
	s.Lookups = len(perName)
	for _, sp := range perName {
		s.DNSTotalMs += msOf(sp.last.Sub(sp.first))
	}
	// The waits requests had for a lookup, the longest per host.
	wait := map[string]float64{}
	if l.DNSMs > 0 && len(hosts) > 0 {
		wait[strings.ToLower(hosts[0])] = l.DNSMs
	}
	for _, r := range l.Resources {
		if r.DNSMs <= 0 {
			continue
		}
		if u, err := url.Parse(r.Name); err == nil {
			h := strings.ToLower(u.Hostname())
			wait[h] = max(wait[h], r.DNSMs)
		}
	}
	s.LookupsBlocking = len(wait)
	for _, w := range wait {
		s.DNSBlockingMs += w
	}
	for _, c := range srv {
		if c.Kind == "query" {
			if ofPage[name(c.QName)] {
				if s.ServerQueries == nil {
					s.ServerQueries = map[string]int{}
				}
				s.ServerQueries[c.Transport]++
			}
			continue
		}
		if !pageConn(c, stubAddrs) {
			continue
		}
		if c.SNI != "" {
			if s.ConnsPerOrigin == nil {
				s.ConnsPerOrigin = map[string]int{}
			}
			s.ConnsPerOrigin[strings.ToLower(c.SNI)]++
		}
		if c.ALPN != "h3" {
			continue
		}
		s.H3Conns++
		if s.H3Conn == nil || (len(hosts) > 0 && strings.EqualFold(c.SNI, hosts[0]) && !strings.EqualFold(s.H3Conn.SNI, hosts[0])) {
			s.H3Conn, s.H3Used0RTT, s.H3Resumed = c, c.Used0RTT, c.Resumed
		}
	}
	s.Origins = originFacts(l, hosts, stub, srv, stubAddrs, name)
	s.PLTMs, s.FCPMs = l.PLTMs, l.FCPMs
	if s.Status != browser.LoadOK {
		return s
	}
	switch {
	case task.H3 != "" && l.Protocol != "h3": // a page asked over HTTP/3 that came otherwise
		s.Status, s.Error = "not-h3", fmt.Sprintf("the page came over %q", l.Protocol)
	case task.DNSMode == "stub" && (len(hosts) == 0 || perName[strings.ToLower(hosts[0])] == nil):
		s.Status, s.Error = "dns-bypassed", "no lookup of "+strings.Join(hosts[:min(1, len(hosts))], "")+" reached the stub during the navigation"
	}
	return s
}

// pageConn says whether a server's record is of a connection the page
// made: an HTTP/3 or HTTP/2 connection to a web listener, not the stub's
// own DoH connection (by its address).
func pageConn(c *server.Record, stubAddrs map[string]bool) bool {
	return c.Listener == "web" && !stubAddrs[c.Remote] && (c.ALPN == "h3" || c.ALPN == "h2")
}

// originFacts gathers per origin the load's requests and their protocols,
// how its name was resolved, and the servers' connections for it, in the
// page's order of origins, then any other host a request went to.
func originFacts(l *browser.Load, hosts []string, stub, srv []*server.Record, stubAddrs map[string]bool, name func(string) string) []OriginFacts {
	var out []OriginFacts
	at := map[string]int{}
	get := func(h string) *OriginFacts {
		h = strings.ToLower(h)
		i, ok := at[h]
		if !ok {
			i = len(out)
			at[h] = i
			out = append(out, OriginFacts{Host: h, Lookup: LookupNone})
		}
		return &out[i]
	}
	for _, h := range hosts {
		get(h)
	}
	protos := map[string][]string{}
	request := func(h, proto string) {
		o := get(h)
		o.Requests++
		if proto != "" && !slices.Contains(protos[o.Host], proto) {
			protos[o.Host] = append(protos[o.Host], proto)
		}
	}
	if len(hosts) > 0 && l.Status == browser.LoadOK {
		request(hosts[0], l.Protocol)
	}
	for _, r := range l.Resources {
		if u, err := url.Parse(r.Name); err == nil && u.Hostname() != "" {
			request(u.Hostname(), r.Protocol)
		}
	}
	for h, ps := range protos {
		slices.Sort(ps)
		out[at[h]].Protocol = strings.Join(ps, "+")
	}
	for _, r := range stub {
		i, ok := at[name(r.QName)]
		if !ok {
			continue
		}
		switch {
		case r.Upstream != nil:
			out[i].Lookup = LookupUpstream
		case out[i].Lookup == LookupNone:
			out[i].Lookup = LookupStubCache
		}
	}
	for _, c := range srv {
		if c.Kind != "conn" || c.SNI == "" || !pageConn(c, stubAddrs) {
			continue
		}
		for _, o := range c.Origins {
			if u, err := url.Parse(o); err == nil {
				if i, ok := at[strings.ToLower(u.Hostname())]; ok {
					out[i].Announced = true
				}
			}
		}
		i, ok := at[strings.ToLower(c.SNI)]
		if !ok {
			continue
		}
		out[i].Conns++
		if c.Used0RTT {
			out[i].Conns0RTT++
		}
		if c.Resumed {
			out[i].Resumed++
		}
	}
	// Origins of the page the load never touched are not part of its story.
	return slices.DeleteFunc(out, func(o OriginFacts) bool { return o.Requests == 0 && o.Conns == 0 && o.Lookup == LookupNone })
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Decouple adds DNS measured apart to a load's times, as the
// cross-layer paper summed a separate resolution and the page load.
func (s *Sample) Decouple(dnsMs float64) {
	s.DNSMs = dnsMs
	s.PLTMs = s.Load.PLTMs + dnsMs
	s.FCPMs = s.Load.FCPMs + dnsMs
}

// ReplayLoad is a page loader's load in the browser's terms, for Assemble
// and the summaries: status, protocol, PLT and first byte (no paints).
func ReplayLoad(r *pageload.Result) *browser.Load {
	// The loader's statuses are the browser's: ok, error, timeout.
	return &browser.Load{URL: r.Page, Start: r.Start, Status: r.Status, Error: r.Error, Protocol: r.Protocol, PLTMs: r.PLTMs, TTFBMs: r.TTFBMs}
}

// AssembleReplay is Assemble for a load of doxlab's page loader. Its
// resources are read as the browser's resource timing would list them
// (the document apart, each over its connection's protocol) for the
// per-origin labels, and left out of the stored Load: Replay holds them.
func AssembleReplay(task Task, r *pageload.Result, hosts []string, stub, srv []*server.Record) *Sample {
	l := ReplayLoad(r)
	for i, f := range r.Resources {
		if i == 0 || f.Error != "" {
			continue
		}
		proto := ""
		if f.Conn >= 0 && f.Conn < len(r.Conns) {
			proto = r.Conns[f.Conn].Protocol
		}
		l.Resources = append(l.Resources, browser.Resource{Name: f.URL, Protocol: proto})
	}
	x := Assemble(task, l, hosts, stub, ownConns(r, srv))
	l.Resources = nil
	x.Replay = r
	return x
}

// BegunSince are the server's records but those of connections that
// began before start: the records Assemble reads of a browser's
// measured navigation, which opens its connections after start. The
// warm-up's connection, whose record a busy server wrote after the
// navigation's mark, was once taken for the page's, its 0-RTT "not
// used". A record that says no beginning is kept.
func BegunSince(srv []*server.Record, start time.Time) []*server.Record {
	return connsWhere(srv, func(c *server.Record) bool { return c.Began.IsZero() || !c.Began.Before(start) })
}

// ownConns are the server's records but those of connections the replay
// r did not open, known by the client's port as the server saw it: the
// warm-up's, as BegunSince says, where the replay knows its own.
func ownConns(r *pageload.Result, srv []*server.Record) []*server.Record {
	ports := replayPorts(r, false)
	return connsWhere(srv, func(c *server.Record) bool { return ports[c.RemotePort()] })
}

// AwaitReplayConns returns the server's records from mark on once they
// hold one of each connection the replay r asked requests on (known by
// the client's port), or after wait with those there are. Servers.Settle
// knows only the connections whose handshake the server saw complete or
// that ended by then: a 0-RTT load can be done before either, its
// record still on its way.
func AwaitReplayConns(ctx context.Context, r *pageload.Result, log *server.RecordLog, mark int, wait time.Duration) []*server.Record {
	missing := replayPorts(r, true)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	recs, _ := log.Await(ctx, mark, func(recs []*server.Record) bool {
		for _, c := range recs {
			if c.Kind == "conn" {
				delete(missing, c.RemotePort())
			}
		}
		return len(missing) == 0
	})
	return recs
}

// replayPorts are the local ports of r's connections, or of those it
// asked requests on.
func replayPorts(r *pageload.Result, asked bool) map[string]bool {
	ports := map[string]bool{}
	for _, c := range r.Conns {
		if _, p, err := net.SplitHostPort(c.Local); err == nil && p != "" && (!asked || c.Requests > 0) {
			ports[p] = true
		}
	}
	return ports
}

// connsWhere are srv's records but its conn records keep refuses.
func connsWhere(srv []*server.Record, keep func(*server.Record) bool) []*server.Record {
	var out []*server.Record
	for _, c := range srv {
		if c.Kind != "conn" || keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// DecodeForAnalysis decodes a stored sample for the report: the records
// it never reads (the stub's records, both navigations whole, the graph
// and the replay: four fifths of a page load's JSON; the server's
// queries; of the page's connection record only whether a token
// validated it) are skipped, not decoded, so a store of a hundred
// thousand loads is reported in a fraction of the memory. Export and
// resume decode samples whole.
func DecodeForAnalysis(raw []byte) (*Sample, error) {
	x := analysed{Sample: new(Sample)}
	if err := UnmarshalAnalysed(raw, &x); err != nil {
		return nil, err
	}
	x.Lighten(x.H3Conn, x.ConnsPerOrigin)
	return x.Sample, nil
}

// UnmarshalAnalysed is encoding/json's Unmarshal, by the engine of its
// second version (go-json-experiment, which encoding/json/v2 is) with the
// first's semantics (DefaultOptionsV1): the first version scans a
// value whole to check it before it decodes it, and again for each
// field it skips, so decoding a page load for analysis took twice as
// long (500,000 loads: 42 s of a report's first read). Of the first's
// semantics, all but its errors': it checks the value whole before it
// decodes (a fifth of the decoding), where the second's stops at the
// first error; either way a load that does not decode is an error.
func UnmarshalAnalysed(raw []byte, v any) error {
	return jsonv2.Unmarshal(raw, v, jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))
}

// Lighten makes a sample decoded for analysis hold what analysis reads
// of it and no more: of its connection record the token (h3, decoded
// in its place), of its connections per origin their sum, and one copy
// of each value its cell's loads repeat (its task's, its status, its
// origins' hosts and labels, its DNS facts'). A campaign's loads, which
// wrap a Sample, are lightened with it.
func (s *Sample) Lighten(h3 *H3Token, conns ConnSum) {
	s.H3Conn, s.ConnsPerOrigin, s.ServerQueries = nil, nil, nil
	s.h3Token, s.conns = h3 != nil && h3.TokenUsed, int(conns)
	t := &s.Task
	for _, f := range []*string{&t.Profile, &t.Page, &t.Transport, &t.StubState, &t.H3, &t.DNSMode, &t.Engine, &t.Setup, &s.Status} {
		*f = unique.Make(*f).Value()
	}
	for i := range s.Origins {
		o := &s.Origins[i]
		o.Host, o.Protocol, o.Lookup = unique.Make(o.Host).Value(), unique.Make(o.Protocol).Value(), unique.Make(o.Lookup).Value()
	}
	if f := s.DNSFacts; f != nil {
		f.Status, f.Protocol = unique.Make(f.Status).Value(), unique.Make(f.Protocol).Value()
	}
}

// analysed is a Sample whose fields of the same JSON names shadow the
// records analysis skips.
type analysed struct {
	*Sample
	DNS            Skipped  `json:"dns"`
	Load           Skipped  `json:"load"`
	WarmUp         Skipped  `json:"warm_up"`
	Graph          Skipped  `json:"graph"`
	Replay         Skipped  `json:"replay"`
	ServerQueries  Skipped  `json:"server_queries"`
	H3Conn         *H3Token `json:"h3_conn"`
	ConnsPerOrigin ConnSum  `json:"conns_per_origin"`
}

// ConnSum decodes a load's connections per origin as their sum, in
// place of the map (Lighten).
type ConnSum int

// UnmarshalJSONFrom sums the map's counts as it reads them: decoding
// the map (encoding/json, handed the value read whole) was a sixth of a
// load's decoding. null is no connections, as an empty map; a count
// that is no integer is an error, as it was.
func (c *ConnSum) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() == 'n' {
		return err
	}
	if tok.Kind() != '{' {
		return fmt.Errorf("connections per origin: %v where an object was expected", tok.Kind())
	}
	var sum int64
	for dec.PeekKind() != '}' {
		if _, err := dec.ReadToken(); err != nil { // the origin
			return err
		}
		v, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch v.Kind() {
		case 'n':
		case '0':
			n, err := strconv.ParseInt(v.String(), 10, strconv.IntSize)
			if err != nil {
				return fmt.Errorf("connections per origin: %w", err)
			}
			sum += n
		default:
			return fmt.Errorf("connections per origin: a count of kind %v", v.Kind())
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	*c += ConnSum(sum)
	return nil
}

// H3Token is what analysis reads of the page's connection record, in
// its place (Lighten).
type H3Token struct {
	TokenUsed bool `json:"token_accepted"`
}

// Skipped takes a JSON value and keeps nothing of it: a field of a
// struct that shadows one a decoder need not read.
type Skipped struct{}

// UnmarshalJSONFrom keeps nothing, and skips the value where it is
// (handed whole, it was read into a buffer first).
func (*Skipped) UnmarshalJSONFrom(dec *jsontext.Decoder) error { return dec.SkipValue() }

// SkippedPaths are the members of a record that decoding it into a value
// of type t skips: its fields of type Skipped, as dotted JSON paths
// ("load.dns" where t's field "load" holds one), the fields it embeds
// left alone (shadowing them is how it skips). A kind's briefs leave
// these out (store.Brief): they are found from the type that decodes,
// so an analysis that comes to read a member makes the briefs made
// before it stale, not short.
func SkippedPaths(t reflect.Type) []string {
	var out []string
	var walk func(t reflect.Type, at string, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, at string, seen map[reflect.Type]bool) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" || !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if f.Type == reflect.TypeFor[Skipped]() {
				out = append(out, at+name)
				continue
			}
			walk(f.Type, at+name+".", seen)
		}
	}
	walk(t, "", map[reflect.Type]bool{})
	return out
}

// AnalysedType is the type DecodeForAnalysis decodes a record into.
var AnalysedType = reflect.TypeFor[analysed]()

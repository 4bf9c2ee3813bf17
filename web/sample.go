package web

import (
	"fmt"
	"net/url"
	"strings"
	"time"

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
	H3        string `json:"h3"`         // 0rtt or 1rtt: whether the browser kept its ticket from the warm-up
	DNSMode   string `json:"dns_mode"`   // stub (DNS in the browser's path) or decoupled (measured apart and added, as the paper did)
	// Engine loads the page: "" or chromium (the browser), or doxlab
	// (doxlab's page loader replaying the page's graph, package pageload).
	Engine string `json:"engine,omitempty"`
	Rep    int    `json:"rep"`
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
		if up := r.Upstream; up != nil && up.Conn.LocalAddr != "" {
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
		if c.Listener != "web" || stubAddrs[c.Remote] || c.ALPN != "h3" && c.ALPN != "h2" {
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
	s.PLTMs, s.FCPMs = l.PLTMs, l.FCPMs
	if s.Status != browser.LoadOK {
		return s
	}
	switch {
	case l.Protocol != "h3":
		s.Status, s.Error = "not-h3", fmt.Sprintf("the page came over %q", l.Protocol)
	case task.DNSMode == "stub" && (len(hosts) == 0 || perName[strings.ToLower(hosts[0])] == nil):
		s.Status, s.Error = "dns-bypassed", "no lookup of "+strings.Join(hosts[:min(1, len(hosts))], "")+" reached the stub during the navigation"
	}
	return s
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

package pages

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// stubQuery is a stub's record of a query answered at ms, which took
// took ms; forwarded over proto from local, or from its cache when proto
// is empty.
func stubQuery(name string, ms, took float64, proto, local string) *server.Record {
	r := &server.Record{Kind: "query", QName: name, Time: at(ms), ServerMs: took}
	if proto != "" {
		r.Upstream = &transport.Record{Protocol: proto, Status: transport.StatusOK, Timing: transport.Timing{TotalMs: took, HandshakeMs: 1.5},
			Conn: transport.ConnInfo{LocalAddr: local, TLSResumed: true}}
	}
	return r
}

// A two-origin page (a.test, b.test) whose load also fetched c.test,
// which a.test's connection announced in an ORIGIN frame: the stub's
// records, the servers' and the browser's resource timing each add
// their part of the sample, and the stub's own DoH connection to the
// web listener is not the page's.
func TestAssembleLabelsWhatHappened(t *testing.T) {
	hosts := []string{"a.test", "B.test"}
	stub := []*server.Record{
		stubQuery("a.test.", 10, 4, "doh2", "10.0.0.2:40000"),
		stubQuery("A.TEST.", 12, 5, "doh2", "10.0.0.2:40000"), // HTTPS, on the same connection
		stubQuery("b.test.", 30, 2, "", ""),                   // the stub's cache
		stubQuery("update.browser.example.", 40, 1, "doh2", "10.0.0.2:40000"),
	}
	srv := []*server.Record{
		{Kind: "query", QName: "a.test.", Transport: "doh2"},
		{Kind: "query", QName: "a.test.", Transport: "doh2"},
		{Kind: "query", QName: "other.test.", Transport: "doh2"},
		{Kind: "conn", Listener: "web", ALPN: "h2", SNI: "a.test", Remote: "10.0.0.2:40000"}, // the stub's DoH
		{Kind: "conn", Listener: "web", ALPN: "h2", SNI: "b.test", Remote: "10.0.0.2:41000", Resumed: true},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Remote: "10.0.0.2:42000", Used0RTT: true, Resumed: true,
			Origins: []string{"https://c.test", "https://elsewhere.test"}},
		{Kind: "conn", Listener: "dns", ALPN: "h3", SNI: "a.test", Remote: "10.0.0.2:43000"}, // not a web listener
	}
	l := &browser.Load{Start: t0, Status: browser.LoadOK, Protocol: "h3", PLTMs: 120, FCPMs: 80, DNSMs: 3,
		Resources: []browser.Resource{
			{Name: "https://a.test/app.js", Protocol: "h3", DNSMs: 1},
			{Name: "https://b.test/img.png", Protocol: "h2", DNSMs: 4},
			{Name: "https://b.test/late.png", Protocol: "h3"},
			{Name: "https://c.test/font.woff", Protocol: "h3"},
			{Name: "data:,x"}, // no host
		}}
	s := Assemble(Task{H3: "0rtt", DNSMode: "stub"}, l, hosts, stub, srv)

	require.Equal(t, browser.LoadOK, s.Status, s.Error)
	require.Equal(t, 1, s.Ignored, "the browser's own lookup")
	require.Len(t, s.DNS, 3)
	require.Equal(t, 2, s.Lookups)
	// a.test's queries began at 6 and 7 ms and were answered at 10 and
	// 12; b.test's began at 28 and was answered at 30.
	require.InDelta(t, 24.0, s.DNSMs, 1e-9, "from the first query read to the last answer, of the page's names")
	require.InDelta(t, 6.0+2.0, s.DNSTotalMs, 1e-9, "each name's span, summed")
	require.Equal(t, 2, s.LookupsBlocking, "a.test (the document's 3 ms beats its script's 1) and b.test")
	require.InDelta(t, 7.0, s.DNSBlockingMs, 1e-9)
	require.Equal(t, map[string]int{"doh2": 2}, s.ServerQueries)
	require.Equal(t, map[string]int{"a.test": 1, "b.test": 1}, s.ConnsPerOrigin, "not the stub's DoH, not a DNS listener's")
	require.Equal(t, 1, s.H3Conns)
	require.Equal(t, "10.0.0.2:42000", s.H3Conn.Remote)
	require.True(t, s.H3Used0RTT)
	require.True(t, s.H3Resumed)
	require.Equal(t, &DNSFacts{Status: "ok", TotalMs: 4, HandshakeMs: 1.5, Resumed: true, Protocol: "doh2"}, s.DNSFacts, "the first query's upstream exchange")
	require.Equal(t, 120.0, s.PLTMs)
	require.Equal(t, 80.0, s.FCPMs)

	require.Equal(t, []OriginFacts{
		{Host: "a.test", Requests: 2, Protocol: "h3", Lookup: LookupUpstream, Conns: 1, Conns0RTT: 1, Resumed: 1},
		{Host: "b.test", Requests: 2, Protocol: "h2+h3", Lookup: LookupStubCache, Conns: 1, Resumed: 1},
		{Host: "c.test", Requests: 1, Protocol: "h3", Lookup: LookupNone, Announced: true},
	}, s.Origins)
	require.Equal(t, 1, s.OriginsByFrame())
	notH3, noLookup, conns, conns0RTT := s.OriginCounts()
	require.Equal(t, []int{1, 1, 2, 1}, []int{notH3, noLookup, conns, conns0RTT})
}

// A load that did not go as the task asked is labelled so, and a load
// that failed keeps the browser's status: neither is a sample of the
// cell it was measured for.
func TestAssembleStatuses(t *testing.T) {
	ok := func(proto string) *browser.Load { return &browser.Load{Status: browser.LoadOK, Protocol: proto} }
	hosts := []string{"a.test"}
	looked := []*server.Record{stubQuery("a.test.", 5, 1, "udp", "")}

	s := Assemble(Task{H3: "1rtt", DNSMode: "stub"}, ok("h2"), hosts, looked, nil)
	require.Equal(t, "not-h3", s.Status)
	require.Contains(t, s.Error, `"h2"`)

	s = Assemble(Task{H3: "1rtt", DNSMode: "stub"}, ok("h3"), hosts, []*server.Record{stubQuery("b.test.", 5, 1, "udp", "")}, nil)
	require.Equal(t, "dns-bypassed", s.Status, "the page's own name never reached the stub")
	require.Contains(t, s.Error, "a.test")

	s = Assemble(Task{H3: "1rtt", DNSMode: "decoupled"}, ok("h3"), hosts, nil, nil)
	require.Equal(t, browser.LoadOK, s.Status, "decoupled loads look up apart")

	s = Assemble(Task{}, ok("h2"), hosts, nil, nil)
	require.Equal(t, browser.LoadOK, s.Status, "a campaign's page speaks what it speaks")

	s = Assemble(Task{H3: "1rtt", DNSMode: "stub"}, &browser.Load{Status: browser.LoadTimeout, Error: "30s"}, hosts, nil, nil)
	require.Equal(t, browser.LoadTimeout, s.Status)
	require.Equal(t, "30s", s.Error)
	require.Empty(t, s.Origins, "a page that never loaded touched none")
}

// On a multi-origin page the sample's H3 connection is the page's own
// host's, whichever connection the servers recorded first.
func TestAssemblePrefersThePageHostsConnection(t *testing.T) {
	srv := []*server.Record{
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "cdn.test", Remote: "r:1", Used0RTT: true},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "WWW.test", Remote: "r:2"},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "cdn.test", Remote: "r:3"},
	}
	s := Assemble(Task{}, &browser.Load{Status: browser.LoadOK, Protocol: "h3"}, []string{"www.test", "cdn.test"}, nil, srv)
	require.Equal(t, 3, s.H3Conns)
	require.Equal(t, "r:2", s.H3Conn.Remote)
	require.False(t, s.H3Used0RTT, "the facts are the chosen connection's")
}

// doxlab's loader's resources are read as resource timing would list
// them: the document apart, each over its connection's protocol, failed
// fetches left out; the stored Load keeps none of them (Replay does).
func TestAssembleReplay(t *testing.T) {
	r := &pageload.Result{Page: "https://a.test/", Start: t0, Status: "ok", Protocol: "h3", PLTMs: 90, TTFBMs: 20,
		Conns: []*pageload.Conn{{Origin: "a.test:443", Protocol: "h3"}, {Origin: "b.test:443", Protocol: "h2"}},
		Resources: []pageload.Fetch{
			{URL: "https://a.test/", Conn: 0},
			{URL: "https://b.test/x.js", Conn: 1},
			{URL: "https://b.test/broken.js", Conn: 1, Error: "reset"},
			{URL: "https://c.test/y.css", Conn: 7}, // no such connection: no protocol
		}}
	s := AssembleReplay(Task{Engine: "doxlab"}, r, []string{"a.test", "b.test"}, nil, nil)
	require.Same(t, r, s.Replay)
	require.Nil(t, s.Load.Resources)
	require.Equal(t, 90.0, s.PLTMs)
	require.Zero(t, s.FCPMs, "a loader paints nothing")
	require.Equal(t, []OriginFacts{
		{Host: "a.test", Requests: 1, Protocol: "h3", Lookup: LookupNone},
		{Host: "b.test", Requests: 1, Protocol: "h2", Lookup: LookupNone},
		{Host: "c.test", Requests: 1, Lookup: LookupNone},
	}, s.Origins)
}

// A replay's H3 connection is one it opened, known by its port as the
// server saw it: the warm-up's connection, whose record a busy server
// wrote after the measured load's mark, once came first and was taken
// for the page's (0-RTT not used, where the replay's was; the web
// experiment's test failed so on a loaded machine). Queries and other
// records stay.
func TestAssembleReplayKeepsItsOwnConnections(t *testing.T) {
	r := &pageload.Result{Page: "https://a.test/", Start: t0, Status: "ok", Protocol: "h3",
		Conns:     []*pageload.Conn{{Origin: "a.test:443", Protocol: "h3", Local: "0.0.0.0:40001", Used0RTT: true}},
		Resources: []pageload.Fetch{{URL: "https://a.test/", Conn: 0}}}
	srv := []*server.Record{
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Remote: "10.200.0.1:40000"}, // the warm-up's, written late
		{Kind: "query", Transport: "doq", QName: "a.test."},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Remote: "10.200.0.1:40001", Used0RTT: true, Resumed: true},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Remote: "no port"},
	}
	s := AssembleReplay(Task{Engine: "doxlab", H3: "0rtt"}, r, []string{"a.test"}, nil, srv)
	require.Equal(t, 1, s.H3Conns, "the replay's own connection alone")
	require.Equal(t, "10.200.0.1:40001", s.H3Conn.Remote)
	require.True(t, s.H3Used0RTT)
	require.True(t, s.H3Resumed)
	require.Equal(t, map[string]int{"doq": 1}, s.ServerQueries)
}

// A replay's sample waits for the server's record of each connection
// that carried its requests, which a server writes once the handshake
// is done and a 0-RTT load can finish before: the 0-RTT load whose
// record came after the servers had settled went without the server's
// word in one CI lane. A connection that asked nothing is not awaited,
// the warm-up's record is no stand-in, and a record that never comes
// holds the sample only up to the wait.
func TestAwaitReplayConns(t *testing.T) {
	r := &pageload.Result{Conns: []*pageload.Conn{
		{Protocol: "h3", Local: "0.0.0.0:40001", Requests: 3},
		{Protocol: "h3", Local: "0.0.0.0:40002"}, // opened, asked nothing
	}}
	var log server.RecordLog
	log.Add(&server.Record{Kind: "conn", ALPN: "h3", Remote: "10.200.0.1:40000"}) // before the mark
	mark := log.Mark()
	log.Add(&server.Record{Kind: "query", Remote: "10.200.0.1:40001"})
	log.Add(&server.Record{Kind: "conn", ALPN: "h3", Remote: "10.200.0.1:39999"}) // the warm-up's, late
	go func() {
		time.Sleep(20 * time.Millisecond)
		log.Add(&server.Record{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Remote: "10.200.0.1:40001", Used0RTT: true})
	}()
	got := AwaitReplayConns(context.Background(), r, &log, mark, time.Minute)
	require.Len(t, got, 3)
	require.Equal(t, "10.200.0.1:40001", got[2].Remote)
	s := AssembleReplay(Task{Engine: "doxlab", H3: "0rtt"}, r, []string{"a.test"}, nil, got)
	require.True(t, s.H3Used0RTT, "the server's word, awaited")

	// A record that never comes: the wait's end, with what came.
	r.Conns = append(r.Conns, &pageload.Conn{Protocol: "h3", Local: "0.0.0.0:40003", Requests: 1})
	start := time.Now()
	got = AwaitReplayConns(context.Background(), r, &log, mark, 30*time.Millisecond)
	require.Len(t, got, 3)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

// A browser's measured navigation reads the records of connections
// begun since it started: a warm-up connection's record, written late,
// is left out; records that say no beginning, and queries, stay.
func TestBegunSince(t *testing.T) {
	warm := &server.Record{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Began: at(0), Time: at(900)}
	page := &server.Record{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "a.test", Began: at(501), Time: at(600), Used0RTT: true}
	old := &server.Record{Kind: "conn", ALPN: "h3", Time: at(700)}
	q := &server.Record{Kind: "query", Time: at(100)}
	require.Equal(t, []*server.Record{page, old, q}, BegunSince([]*server.Record{warm, page, old, q}, at(500)))
	s := Assemble(Task{H3: "0rtt"}, &browser.Load{Status: browser.LoadOK, Protocol: "h3", Start: at(500)}, []string{"a.test"}, nil,
		BegunSince([]*server.Record{warm, page}, at(500)))
	require.True(t, s.H3Used0RTT, "the page's own connection, not the warm-up's")
}

// Decouple adds DNS measured apart to the browser's times, as the
// cross-layer paper summed them.
func TestDecouple(t *testing.T) {
	s := &Sample{Load: &browser.Load{PLTMs: 100, FCPMs: 60}, PLTMs: 100, FCPMs: 60}
	s.Decouple(12.5)
	require.Equal(t, []float64{12.5, 112.5, 72.5}, []float64{s.DNSMs, s.PLTMs, s.FCPMs})
	s.Decouple(2)
	require.Equal(t, 102.0, s.PLTMs, "from the browser's time, not added twice")
}

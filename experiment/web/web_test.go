package web

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/pageload"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// TestWebLoadsThroughStub runs the web experiment on the fiber profile:
// a corpus page over HTTP/3 inside the testbed, the browser's DNS
// through the stub over each transport. It checks what really happened
// on every layer: h3, 0-RTT accepted by the server exactly when the
// ticket was kept, and the page's lookups reaching the server over the
// stub's transport and no other. One page: the corpus's others load in
// Chromium in TestDoxlabEngineBesideChromium (example, insta) and
// TestMultiOriginPage (o20), and all three were 36 loads, 50 s of CI.
func TestWebLoadsThroughStub(t *testing.T) {
	dir, bin := setup(t)
	db := filepath.Join(dir, "web.db")
	c := &Web{Profiles: []string{"fiber"}, Transports: []string{"udp", "tcp", "dot", "doh2", "doh3", "doq"}, Pages: []string{"wiki"}, Repeat: 1,
		Env: experiment.Env{Store: db, Log: testWriter{t}}, Doxlab: bin}
	loads, _, _ := run(t, c)
	require.Len(t, loads, 6*2, "transports × h3 modes")
	for _, x := range loads {
		require.Equal(t, "ok", x.Status, "%s: %s", x.Key(), x.Error)
		require.Equal(t, "h3", x.Load.Protocol)
		require.Equal(t, x.H3 == "0rtt", x.H3Used0RTT, "%s: 0-RTT accepted by the server iff the ticket was kept", x.Key())
		require.Equal(t, x.H3 == "0rtt", x.H3Resumed, x.Key())
		require.NotEmpty(t, x.DNS, "%s: the page's lookups went through the stub", x.Key())
		require.NotNil(t, x.DNSFacts)
		require.Equal(t, x.Transport, x.DNSFacts.Protocol)
		require.Equal(t, []string{x.Transport}, keys(x.ServerQueries), "%s: the server saw the page's lookups over the stub's transport only", x.Key())
		require.Greater(t, x.PLTMs, 0.0)
		require.Greater(t, x.DNSMs, 0.0)
	}
	cells := pages.Summarize(loads)
	require.Len(t, cells, 6*2)
	for _, c := range cells {
		if c.Baseline() {
			require.Zero(t, c.RelPLT)
		}
	}
}

// TestMultiOriginPage loads o20 in Chromium, its origins on three server
// hosts at their distances: every lookup of its 20 names goes through the
// stub, most block a request, each origin gets a connection of its own
// (no certificate covers two), the first party's connection labels the
// load, and the report's findings and figure see the lookups.
func TestMultiOriginPage(t *testing.T) {
	dir, bin := setup(t)
	db := filepath.Join(dir, "web.db")
	c := &Web{Profiles: []string{"fiber"}, Transports: []string{"udp"}, Pages: []string{"o20"}, Repeat: 1,
		Env: experiment.Env{Store: db, Log: testWriter{t}}, Doxlab: bin}
	loads, _, _ := run(t, c)
	require.Len(t, loads, 2, "h3 modes")
	for _, x := range loads {
		require.Equal(t, "ok", x.Status, "%s: %s", x.Key(), x.Error)
		require.Equal(t, 20, x.Lookups, x.Key())
		require.Greater(t, x.LookupsBlocking, 10, "%s: most lookups held a request up", x.Key())
		require.Positive(t, x.DNSBlockingMs)
		require.Len(t, x.ConnsPerOrigin, 20, "%s: a connection per origin: %v", x.Key(), x.ConnsPerOrigin)
		require.Equal(t, "www.o20.doxlab.test", x.H3Conn.SNI)
		require.Equal(t, x.H3 == "0rtt", x.H3Used0RTT, "%s: the first party's 0-RTT as the server saw it", x.Key())
		require.Len(t, x.Origins, 20, x.Key())
		requested := 0
		for _, o := range x.Origins {
			require.Equal(t, pages.LookupUpstream, o.Lookup, "%s: %s", x.Key(), o.Host)
			if o.Requests > 0 { // a preconnected origin may have none
				requested++
				require.Equal(t, "h3", o.Protocol, "%s: %s", x.Key(), o.Host)
			}
		}
		require.Greater(t, requested, 15, x.Key())
	}
	var b strings.Builder
	require.NoError(t, LoadsOfSamples(loads...).WriteTable(&b))
	require.Contains(t, b.String(), "pages over several origins")
	fs := LoadsOfSamples(loads...).Findings()
	require.Equal(t, "A typical page needs about 20 DNS lookups", fs[2].Claim)
	require.Equal(t, experiment.Holds, fs[2].Verdict, fs[2].Here)
	sec, err := LoadsOfSamples(loads...).Section(t.TempDir())
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(sec.Files, func(f string) bool { return strings.Contains(f, "web-lookups") }), "%v", sec.Files)

	c.DNSModes = []string{"decoupled"}
	_, err = c.Run(context.Background())
	require.ErrorContains(t, err, "decoupled DNS measures one lookup apart")
}

// TestDoxlabEngineBesideChromium runs the web experiment with both
// engines on two pages, the stub on DoQ: doxlab's page loader replays
// the graph chosen among Chromium's measured loads on the profile, its
// loads pass the same checks (the page's lookup through the stub over
// the stub's transport, the warm load's connection resumed in 0-RTT as
// the server saw it), and the text table compares the engines. Every
// Chromium load carries its graph, with the load's own times, its
// bodies' ends on the wire among them (its packets, decrypted), and the
// document's gap counts its lookup and handshake as the packets show
// them: the stub's DoQ connections carry request streams too, and the
// one-request page's document must not pair with one of them. The
// client's link is captured (--pcap) for a look at both engines'
// packets.
func TestDoxlabEngineBesideChromium(t *testing.T) {
	dir, bin := setup(t)
	db := filepath.Join(dir, "web.db")
	c := &Web{Profiles: []string{"fiber"}, Transports: []string{"doq"}, StubStates: []string{"cold"}, Pages: []string{"insta", "example"}, Engines: []string{"chromium", "doxlab"}, Repeat: 2,
		Env: experiment.Env{Store: db, Log: testWriter{t}}, Doxlab: bin, PcapDir: filepath.Join(dir, "pcap")}
	loads, st, id := run(t, c)
	require.Len(t, loads, 2*2*2*2, "pages × engines × h3 modes × repeats")
	docsOnWire, doxlab0RTT := 0, 0
	var docGaps []float64
	for _, x := range loads {
		require.Equal(t, "ok", x.Status, "%s: %s", x.Key(), x.Error)
		require.Equal(t, []string{"doq"}, keys(x.ServerQueries), "%s: the page's lookup went through the stub", x.Key())
		if x.EngineName() == pages.EngineChromium {
			require.Equal(t, x.H3 == "0rtt", x.H3Used0RTT, "%s: 0-RTT as the server saw it", x.Key())
			require.NotNil(t, x.Graph, "%s: the browser's measured load, traced for the replays", x.Key())
			require.GreaterOrEqual(t, x.Graph.WireEnds(), len(x.Graph.Resources)/2, "%s: bodies' ends from the link", x.Key())
			// A document asked in 0-RTT is timed from its connection's
			// first 0-RTT packet, and misses DevTools' send time in about
			// one load in a hundred; its gap is then DevTools'.
			if x.Graph.Resources[0].WireEndMs > 0 {
				docsOnWire++
				docGaps = append(docGaps, x.Graph.Resources[0].GapMs)
			} else {
				t.Logf("%s (h3 %s): the document's stream not found in the capture", x.Key(), x.H3)
			}
		}
		if x.EngineName() == pages.EngineDoxlab {
			require.NotNil(t, x.Replay)
			require.Len(t, x.Replay.Conns, 1)
			require.Equal(t, "stub", x.Replay.Lookups[0].Transport)
			// The server's and the loader's word on the connection agree,
			// and a 1-RTT load never resumes in 0-RTT. A 0-RTT load of the
			// one-request page went 1-RTT once in CI, the server's record
			// saying so (the loader's was not printed; 52 such loads on a
			// busy machine did not do it again): the log says both, and one
			// in four may.
			// The server's record of the connection is awaited (it once
			// missed the second the servers are given to settle, the
			// loader saying 0-RTT used).
			cn := x.Replay.Conns[0]
			require.NotNil(t, x.H3Conn, "%s: the server's record of the connection; the loader's %+v", x.Key(), *cn)
			require.Equal(t, cn.Used0RTT, x.H3Used0RTT, "%s: 0-RTT as the server saw it (%+v) and the loader (%+v)", x.Key(), x.H3Conn, *cn)
			require.False(t, x.H3 == "1rtt" && cn.Used0RTT, x.Key())
			if x.H3 == "0rtt" && cn.Used0RTT {
				doxlab0RTT++
			} else if x.H3 == "0rtt" {
				t.Logf("%s went 1-RTT: the server's record %+v, the loader's %+v", x.Key(), x.H3Conn, *cn)
			}
		}
	}
	require.GreaterOrEqual(t, doxlab0RTT, 2*2*3/4, "doxlab's 0-RTT loads in 0-RTT")
	// A document asked in 0-RTT misses its stream about once in a hundred
	// loads; under a busy machine (go test runs packages side by side)
	// twice in eight was seen. Three in four still proves the pairing.
	require.GreaterOrEqual(t, docsOnWire, 2*2*2*3/4, "the documents' ends from the link")
	// The stub's cold DoQ lookup is two round trips of 14.8 ms: a gap
	// that held it would be over 29.6 ms, so the bound is three quarters
	// of that, on the median, as timing on a busy 2-core machine must be.
	// What is left of the gap is the browser's own time, which a busy
	// machine stretches: medians of 3-8 ms idle, but 13.2 ms (gaps of
	// 3.6-18.0) in a CI whose unit lane compiled and ran Chromium beside
	// it, past the 10 ms that was the bound.
	lookup := 2 * float64(testbed.Profiles["fiber"].RTT()) / float64(time.Millisecond)
	t.Logf("the documents' gaps: %v ms", docGaps)
	require.Less(t, stats.Median(docGaps), testutil.ScaledMs(0.75*lookup), "the document's lookup is not the browser's time")
	n := 0
	require.NoError(t, st.Results(context.Background(), id, Graphs, func(_ string, raw []byte) error {
		n++
		g, err := pageload.ParseGraph(raw)
		require.NoError(t, err)
		for _, r := range g.Resources {
			require.Greater(t, r.EndMs, r.SentMs, "%s: the captured load's times", r.URL)
			if r.WireEndMs > 0 {
				require.Less(t, r.WireEndMs, r.EndMs+1, "%s: on the wire before DevTools registered it", r.URL)
			}
		}
		// Chromium's QUIC decrypted with the server's key log, and most
		// requests paired with their streams.
		require.Equal(t, 2*2, g.Captured.Loads, "chosen among Chromium's measured loads")
		require.LessOrEqual(t, g.Resources[len(g.Resources)-1].EndMs, g.PLTMs)
		return nil
	}))
	require.Equal(t, 2, n, "a graph chosen and stored for each page on the profile")
	// Both engines' packets, from the server's port 443, as the client's link delivered them.
	tshark := testutil.Need(t, "tshark", "apt-get install tshark")
	out, err := exec.Command(tshark, "-r", filepath.Join(c.PcapDir, "client-down.pcap"), "-Y", "udp.srcport == 443", "-T", "fields", "-e", "frame.number").Output()
	require.NoError(t, err)
	require.Greater(t, strings.Count(string(out), "\n"), 8*(16+1), "at least a packet per resource of every load")
	var b strings.Builder
	require.NoError(t, LoadsOfSamples(loads...).WriteTable(&b))
	require.Contains(t, b.String(), "doxlab's page loader against Chromium")
	require.Len(t, pages.CompareEngines(pages.Summarize(loads)).Cells, 2*2)
}

// setup skips without root or Chromium and builds the doxlab binary the
// experiment runs as the stub; it returns a directory for the test.
func setup(t *testing.T) (dir, bin string) {
	testutil.NeedRoot(t, "the testbed needs root")
	if _, err := browser.FindExec(""); err != nil {
		testutil.Missing(t, "chromium")
	}
	return t.TempDir(), testutil.Doxlab(t)
}

// run runs the experiment c and returns its loads, its store (open
// until the test ends) and its ID.
func run(t *testing.T, c *Web) ([]*pages.Sample, *store.Store, string) {
	ctx := context.Background()
	id, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, c.Store)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	loads, err := ReadLoads(ctx, st, id)
	require.NoError(t, err)
	return loads, st, id
}

func keys(m map[string]int) (out []string) {
	for k := range m {
		out = append(out, k)
	}
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestAssembleLabels checks what a sample says happened: the page's
// lookups apart from the browser's own, the DNS time from the stub's
// first query read to its last answer, and the browser's QUIC connection
// told apart from the stub's own DoH/3 connection to the same server.
func TestAssembleLabels(t *testing.T) {
	t0 := time.Now()
	stubDoH := "10.200.0.1:40000"
	up := &transport.Record{Protocol: "doh3", Status: transport.StatusOK, Conn: transport.ConnInfo{LocalAddr: stubDoH, TLSResumed: true}}
	stub := []*server.Record{
		{Kind: "query", QName: "wiki.doxlab.test.", QType: "HTTPS", Time: t0.Add(30 * time.Millisecond), ServerMs: 30, Upstream: up},
		{Kind: "query", QName: "WIKI.doxlab.test.", QType: "A", Time: t0.Add(35 * time.Millisecond), ServerMs: 34, Upstream: up},
		{Kind: "query", QName: "update.googleapis.com.", QType: "A", Time: t0, ServerMs: 1},
	}
	srv := []*server.Record{
		{Kind: "query", QName: "wiki.doxlab.test.", Transport: "doh3"},
		{Kind: "conn", Listener: "web", ALPN: "h3", Remote: stubDoH},
		{Kind: "conn", Listener: "web", ALPN: "h3", Remote: "10.200.0.1:40001", Used0RTT: true, Resumed: true},
	}
	task := pages.Task{Profile: "fiber", Page: "wiki", Transport: "doh3", StubState: "cold", H3: "0rtt", DNSMode: "stub", Rep: 3}
	require.Equal(t, "fiber|wiki|doh3|cold|0rtt|stub|3", task.Key())
	x := pages.Assemble(task, &browser.Load{Status: "ok", Protocol: "h3", PLTMs: 120, FCPMs: 80}, []string{"wiki.doxlab.test"}, stub, srv)
	require.Equal(t, "ok", x.Status)
	require.Len(t, x.DNS, 2)
	require.Equal(t, 1, x.Ignored, "the browser's own lookup is left out")
	require.InDelta(t, 35.0, x.DNSMs, 0.01, "from the first query read (t0) to the last answer written (t0+35 ms)")
	require.Equal(t, 1, x.H3Conns, "the stub's DoH/3 connection is not the browser's")
	require.True(t, x.H3Used0RTT)
	require.Equal(t, map[string]int{"doh3": 1}, x.ServerQueries)
	require.True(t, x.DNSFacts.Resumed)

	x = pages.Assemble(task, &browser.Load{Status: "ok", Protocol: "h2", PLTMs: 120}, []string{"wiki.doxlab.test"}, stub, srv)
	require.Equal(t, "not-h3", x.Status, "a page that fell back to HTTP/2 is labelled, not counted")
	x = pages.Assemble(task, &browser.Load{Status: "ok", Protocol: "h3", PLTMs: 120}, []string{"wiki.doxlab.test"}, stub[2:], nil)
	require.Equal(t, "dns-bypassed", x.Status)
	x.Status = "ok"
	x.Decouple(20)
	require.Equal(t, 140.0, x.PLTMs)

	// A multi-origin page: lookups per name, those a request waited for,
	// connections per origin.
	hosts := []string{"www.o5.doxlab.test", "static.o5.doxlab.test", "tags.tagmanager.doxlab.test"}
	stub = []*server.Record{
		{Kind: "query", QName: "www.o5.doxlab.test.", QType: "A", Time: t0.Add(20 * time.Millisecond), ServerMs: 20},
		{Kind: "query", QName: "www.o5.doxlab.test.", QType: "HTTPS", Time: t0.Add(22 * time.Millisecond), ServerMs: 22},
		{Kind: "query", QName: "static.o5.doxlab.test.", QType: "A", Time: t0.Add(80 * time.Millisecond), ServerMs: 20},
		{Kind: "query", QName: "tags.tagmanager.doxlab.test.", QType: "A", Time: t0.Add(90 * time.Millisecond), ServerMs: 10},
	}
	srv = []*server.Record{
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "static.o5.doxlab.test", Remote: "10.200.0.1:1"},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "www.o5.doxlab.test", Remote: "10.200.0.1:2", Used0RTT: true},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "tags.tagmanager.doxlab.test", Remote: "10.200.0.1:3"},
		{Kind: "conn", Listener: "web", ALPN: "h3", SNI: "tags.tagmanager.doxlab.test", Remote: "10.200.0.1:4"},
	}
	l := &browser.Load{Status: "ok", Protocol: "h3", PLTMs: 300, DNSMs: 22, Resources: []browser.Resource{
		{Name: "https://static.o5.doxlab.test/o5/js1.js", DNSMs: 19.5},
		{Name: "https://static.o5.doxlab.test/o5/js2.js"},
		{Name: "https://tags.tagmanager.doxlab.test/o5/js3.js"}, // resolved by a preconnect: no wait
	}}
	x = pages.Assemble(task, l, hosts, stub, srv)
	require.Equal(t, "ok", x.Status)
	require.Equal(t, 3, x.Lookups)
	require.InDelta(t, 22+20+10, x.DNSTotalMs, 0.01, "each name from its first query to its last answer")
	require.Equal(t, 2, x.LookupsBlocking, "the document's and static's; the tag manager's was resolved ahead")
	require.InDelta(t, 22+19.5, x.DNSBlockingMs, 0.01)
	require.Equal(t, map[string]int{"www.o5.doxlab.test": 1, "static.o5.doxlab.test": 1, "tags.tagmanager.doxlab.test": 2}, x.ConnsPerOrigin)
	require.Equal(t, "www.o5.doxlab.test", x.H3Conn.SNI, "the page's own connection labels the load")
	require.True(t, x.H3Used0RTT)

	// A DoUDP query of the stub's that left from the port a page's QUIC
	// connection had too (both the host's ephemeral ports) is no DoH
	// connection of the stub's: the page's connection still counts.
	udpUp := &transport.Record{Protocol: "udp", Conn: transport.ConnInfo{LocalAddr: "10.200.0.1:3"}}
	collided := append(slices.Clone(stub), &server.Record{Kind: "query", QName: "tags.tagmanager.doxlab.test.", QType: "HTTPS", Time: t0.Add(91 * time.Millisecond), Upstream: udpUp})
	x = pages.Assemble(task, l, hosts, collided, srv)
	require.Equal(t, 2, x.ConnsPerOrigin["tags.tagmanager.doxlab.test"])

	// Per origin: what came over what, how each name was resolved, and
	// each origin's connections, a third party over h2 and a font host
	// the stub never saw (the browser's cache) included.
	l.Resources = append(l.Resources,
		browser.Resource{Name: "https://tags.tagmanager.doxlab.test/o5/px.gif", Protocol: "h2"},
		browser.Resource{Name: "https://fonts.doxlab.test/f.woff2", Protocol: "h3"})
	l.Resources[0].Protocol, l.Resources[1].Protocol, l.Resources[2].Protocol = "h3", "h3", "h3"
	stub = append(stub, &server.Record{Kind: "query", QName: "static.o5.doxlab.test.", QType: "A", Time: t0.Add(81 * time.Millisecond), Upstream: up})
	x = pages.Assemble(task, l, append(hosts, "fonts.doxlab.test", "unused.doxlab.test"), stub, srv)
	require.Equal(t, []pages.OriginFacts{
		{Host: "www.o5.doxlab.test", Requests: 1, Protocol: "h3", Lookup: pages.LookupStubCache, Conns: 1, Conns0RTT: 1},
		{Host: "static.o5.doxlab.test", Requests: 2, Protocol: "h3", Lookup: pages.LookupUpstream, Conns: 1},
		{Host: "tags.tagmanager.doxlab.test", Requests: 2, Protocol: "h2+h3", Lookup: pages.LookupStubCache, Conns: 2},
		{Host: "fonts.doxlab.test", Requests: 1, Protocol: "h3", Lookup: pages.LookupNone},
	}, x.Origins, "the origin the load never touched is left out")
	c := pages.Summarize([]*pages.Sample{x})[0]
	require.Equal(t, 1.0, c.NotH3, "the tag manager's pixel came over h2")
	require.Equal(t, 1.0, c.NoLookup, "the font host's name never reached the stub")
	require.InDelta(t, 0.25, c.Conns0RTT, 1e-9, "one of four connections in 0-RTT")

	// A cell whose loads all failed has no change to show, not −100 %.
	base, failed := *x, *x
	base.Transport, base.H3 = "udp", "1rtt"
	failed.Transport, failed.H3, failed.Status = "doh2", "1rtt", "warm-up-failed"
	cells := pages.Summarize([]*pages.Sample{&base, &failed})
	require.Equal(t, "doh2", cells[1].Transport)
	require.True(t, math.IsNaN(cells[1].RelPLT), "%v", cells[1].RelPLT)
	require.Zero(t, cells[0].RelPLT, "the baseline against itself")
	var b strings.Builder
	require.NoError(t, LoadsOfSamples(&base, &failed).WriteTable(&b))
	require.NotContains(t, b.String(), "-100")
	require.Regexp(t, `doh2 +cold +1rtt +0/1 .* – +– `, b.String())
}

// TestLoadRow: the export's row counts a load's lookups and origins as
// the sample has them.
func TestLoadRow(t *testing.T) {
	x := &pages.Sample{Task: pages.Task{Profile: "fiber", Page: "o5"}, Status: "ok", Lookups: 3, LookupsBlocking: 2,
		Origins: []pages.OriginFacts{
			{Host: "www.o5", Requests: 3, Protocol: "h3", Lookup: pages.LookupUpstream, Conns: 1, Conns0RTT: 1},
			{Host: "tags", Requests: 2, Protocol: "h2+h3", Lookup: pages.LookupUpstream, Conns: 2},
			{Host: "fonts", Requests: 1, Protocol: "h3", Lookup: pages.LookupNone},
		}}
	r := Row("run", x)
	require.Equal(t, [7]int64{3, 2, 3, 1, 1, 3, 1}, [7]int64{r.Lookups, r.LookupsBlocking, r.Origins, r.OriginsNotH3, r.OriginsNoLookup, r.Conns, r.Conns0RTT},
		"lookups, blocking, origins, not h3, no lookup, conns, 0-RTT conns")
	require.Equal(t, "run", r.RunID)
}

// TestMain runs the tests where the loopback net can bind its ports
// (testutil.Rootless) and removes the binary testutil.Doxlab built.
func TestMain(m *testing.M) { testutil.Rootless(m) }

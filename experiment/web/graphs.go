package web

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/pageload/capture"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// replaysBrowser says whether the doxlab engine runs beside Chromium: its
// graphs then come from Chromium's measured loads, each traced.
func (e *webEnv) replaysBrowser() bool {
	return slices.Contains(e.c.Engines, pages.EngineChromium) && slices.Contains(e.c.Engines, pages.EngineDoxlab)
}

// poolGraphs gathers the graphs of the profile's traced loads already
// stored (a resumed run's).
func (e *webEnv) poolGraphs(ctx context.Context, profile, runID string) error {
	loads, err := ReadLoads(ctx, e.st, runID) // and of runs whose ID begins with runID's
	if err != nil {
		return err
	}
	for _, x := range loads {
		if x.Profile == profile && x.Graph != nil {
			key := graphKey(x.Profile, x.Page)
			e.pool[key] = append(e.pool[key], x.Graph)
		}
	}
	return nil
}

// replay is one task for doxlab's page loader, as sample is for the
// browser: a warm-up load, then the measured load with the warm-up's
// ticket kept (0-RTT) or dropped (1-RTT), its DNS through the stub.
func (e *webEnv) replay(ctx context.Context, st *stub, t pages.Task) (*pages.Sample, error) {
	page := e.pages[t.Page]
	fail := func(status string, err error) *pages.Sample {
		return &pages.Sample{Task: t, Start: time.Now(), Status: status, Error: err.Error()}
	}
	g, err := e.graph(ctx, t.Profile, page)
	if err != nil {
		return fail("graph-failed", err), nil
	}
	dns, err := e.stubDNS(e.c.Timeout)
	if err != nil {
		return nil, err
	}
	defer dns.Close()
	l, err := pageload.New(pageload.Config{ZeroRTT: t.H3 == "0rtt", Resolver: &pageload.DNS{Name: "stub", Transport: dns}, RootCAs: e.roots,
		MaxLookups: pageload.ChromiumMaxLookups, HTTPSAlongside: true, Tokens: pageload.TokensChromium, OpenSockets: e.inClient, Timeout: e.c.Timeout,
		AllowSpecial: experiment.OwnBlock(e.tb, "server")})
	if err != nil {
		return nil, err
	}
	warm := l.Load(ctx, g)
	if t.H3 == "1rtt" {
		l.Forget()
	}
	if warm.Status != "ok" {
		return fail("warm-up-failed", fmt.Errorf("warm-up: %s %s", warm.Status, warm.Error)), nil
	}
	// The warm-up's connection records are written once the server's
	// goroutines get to them: settled first, they fall before the mark,
	// never among the measured load's (its first h3 connection, not
	// resumed, once stood for the 0-RTT load's).
	e.srvs.Settle(ctx)
	sm, cm := st.records.Mark(), e.srvRecords.Mark()
	r := l.Load(ctx, g)
	time.Sleep(50 * time.Millisecond) // as for the browser: the last records through the stub's pipe
	e.srvs.Settle(ctx)
	srv := pages.AwaitReplayConns(ctx, r, &e.srvRecords, cm, replayRecordWait)
	x := pages.AssembleReplay(t, r, page.Hostnames(), st.records.Since(sm), srv)
	x.WarmUp = pages.ReplayLoad(warm)
	// The loader resolves a host when a request needs it: each of its
	// lookups held a request up.
	x.LookupsBlocking, x.DNSBlockingMs = 0, 0
	for _, lk := range r.Lookups {
		if lk.EndMs > lk.StartMs {
			x.LookupsBlocking++
			x.DNSBlockingMs += lk.EndMs - lk.StartMs
		}
	}
	return x, nil
}

// replayRecordWait bounds the wait for the server's records of a replay's
// connections: they come within milliseconds of the load's end, but a
// connection the server never recorded must not hold the run.
const replayRecordWait = 5 * time.Second

// graph is a page's dependency graph on a profile, stored with the run:
// beside Chromium, the one chosen among Chromium's measured loads of the
// page on the profile, all traced (MedianGraph). Chromium's time for a
// page on fiber moves by more than the fidelity target from minute to
// minute, so a graph of three loads in a row, at one moment, missed the
// run's other loads by up to 29 %. The doxlab engine alone captures
// graphCaptures loads and chooses among them.
func (e *webEnv) graph(ctx context.Context, profile string, page corpus.Page) (*pageload.Graph, error) {
	key := graphKey(profile, page.Name)
	if g, ok := e.graphs[key]; ok {
		return g, nil
	}
	if e.replaysBrowser() {
		g := pageload.MedianGraph(e.pool[key])
		if g == nil {
			return nil, fmt.Errorf("no load of %s by Chromium on %s gave a graph", page.Name, profile)
		}
		return e.keepGraph(ctx, key, page.Name, profile, g)
	}
	b, err := e.browserFor(ctx, captureBrowser, &page)
	if err != nil {
		return nil, err
	}
	var gs []*pageload.Graph
	for range graphCaptures {
		if err := b.Reset(ctx, true); err != nil {
			return nil, err
		}
		l, tr, err := e.trace(ctx, b, page)
		if err != nil {
			return nil, err
		}
		g, err := capture.FromTrace(e.url(page), l, tr, pageload.Provenance{Browser: b.Version(), Profile: profile, At: time.Now().UTC()})
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	if err := b.Reset(ctx, true); err != nil {
		return nil, err
	}
	return e.keepGraph(ctx, key, page.Name, profile, pageload.MedianGraph(gs))
}

// graphKey is a page's key on a profile in webEnv's graphs and pool, and
// in the stored graphs' task keys.
func graphKey(profile, page string) string { return profile + "|" + page }

// keepGraph stores g as the graph of a page on a profile, for the run's
// replays.
func (e *webEnv) keepGraph(ctx context.Context, key, page, profile string, g *pageload.Graph) (*pageload.Graph, error) {
	at := time.Now()
	if err := e.st.WriteResult(ctx, e.runID, Graphs, fmt.Sprintf("%s|%d", key, at.UnixNano()), at, g); err != nil {
		return nil, err
	}
	e.graphs[key] = g
	fmt.Fprintf(e.c.Log, "web: %s's graph on %s, of %d Chromium loads: %d resources (%d ends on the wire), the browser's time %.1f ms (the document's gap %.1f), Chromium's PLT %.1f ms\n",
		page, profile, g.Captured.Loads, len(g.Resources), g.WireEnds(), g.BrowserMs(), g.Resources[0].GapMs, g.PLTMs)
	return g, nil
}

// trace traces one load of page in the capture browser while the client's
// link is sniffed, and gives each body its end on the wire
// (capture.MatchWire): the load's QUIC, decrypted with the page
// servers' TLS secrets. DevTools' ends come later, by Chromium's intake
// of each body; the graph keeps both, and says how many ends it has from
// the wire.
func (e *webEnv) trace(ctx context.Context, b *browser.Browser, page corpus.Page) (*browser.Load, *browser.NetTrace, error) {
	sn, err := e.tb.Sniff("client")
	if err != nil {
		return nil, nil, err
	}
	l, tr, err := b.Trace(ctx, e.url(page), e.c.Timeout)
	pkts, serr := sn.Stop()
	if err != nil {
		return nil, nil, err
	}
	if kl, kerr := readKeyLog(e.keyLog); serr == nil && kerr == nil {
		capture.MatchWire(tr, e.wire(pkts, kl, page.Hostnames()))
	}
	return l, tr, nil
}

func readKeyLog(path string) (overhead.KeyLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return overhead.ReadKeyLog(f)
}

// wire is the load in pkts as MatchWire reads it: the connections to
// the page servers and the resolver (the stub's upstream), their
// packets, and the request streams of the QUIC connections to the page's
// hosts, decrypted with kl. The stub's DoQ and DoH/3 connections have
// request streams too, and a one-request page's document could pair
// with one of them: the ClientHello's server name tells them apart.
func (e *webEnv) wire(pkts []testbed.Packet, kl overhead.KeyLog, hosts []string) capture.Wire {
	raws := make([]overhead.Raw, len(pkts))
	for i, p := range pkts {
		raws[i] = overhead.Raw{Time: p.Time, Data: p.Data}
	}
	addrs := map[string]bool{e.ip: true}
	for host := range e.srvs {
		addrs[e.tb.IP(host)] = true
	}
	var w capture.Wire
	n := 0 // connections so far
	for a := range addrs {
		srv, err := netip.ParseAddr(a)
		if err != nil {
			continue
		}
		conns, err := overhead.Attribute(raws, srv, overhead.DefaultApps, kl)
		if err != nil {
			continue
		}
		for _, c := range conns {
			for _, st := range c.Streams {
				if slices.Contains(hosts, c.SNI) {
					w.Streams = append(w.Streams, capture.WireStream{Conn: n, Request: st.Request, Last: st.Last})
				}
			}
			for _, p := range c.Packets {
				w.Packets = append(w.Packets, capture.WirePacket{Conn: n, At: p.Time, Up: p.FromClient})
			}
			n++
		}
	}
	return w
}

// graphCaptures is how many times a page is traced per profile; the
// capture with the median PLT is replayed.
const graphCaptures = 3

// Graphs are the pages' dependency graphs the doxlab engine replayed,
// one per profile and page, as captured.
var Graphs = store.NewKind("page-graph")

// captureBrowser is the browser graphs are captured in: one for the
// run, as the measured loads' browser was before each stub had its own
// and the loader's fidelity was measured so. Captures each in a browser
// just started had onload gaps from 9 to 24 ms from run to run, and the
// gaps are what a graph keeps.
const captureBrowser = "capture"

package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestWildAnalysis builds campaign loads whose DoQ FCP is 10 % above
// DoUDP's and DoH's 20 % (the study's p40), and checks the pairing, the
// quantiles, the overview's shares and the findings' verdicts.
func TestWildAnalysis(t *testing.T) {
	var w Wild
	load := func(v, target, tr string, rep int, fcp float64, up transport.ConnInfo) wildPoint {
		x := &wildLoad{PageLoad: &campaign.PageLoad{Task: measure.Task{Target: target, Transport: tr, Page: "https://a.example/", Rep: rep, Round: 1},
			Status: "ok", Vantage: &measure.Vantage{Name: v}, Resolver: "doq: v1; region=EU"}}
		x.Sample = &pages.Sample{Status: "ok", FCPMs: fcp, PLTMs: 2 * fcp}
		x.Stub = []*server.Record{{Upstream: &transport.Record{Status: transport.StatusOK, Conn: up}}}
		return pointOfWild(x)
	}
	for rep := range 20 {
		base := 100 + float64(rep)
		w = append(w,
			load("fra", "10.0.0.1", "udp", rep, base, transport.ConnInfo{}),
			load("fra", "10.0.0.1", "doq", rep, base*1.10, transport.ConnInfo{TLSResumed: true, QUICVersion: "v1", ALPN: "doq", TokenUsed: rep%2 == 0}),
			load("fra", "10.0.0.1", "doh2", rep, base*1.20, transport.ConnInfo{TLSResumed: true, ALPN: "h2"}))
	}
	// A DoQ load without its DoUDP twin is left out of the pairs; a failed
	// load is counted, never timed.
	w = append(w, load("nyc", "10.0.0.1", "doq", 0, 500, transport.ConnInfo{}))
	// A resolver that loaded the page over DoUDP and DoQ but not DoH is
	// left out of every protocol's pairs, as the study kept resolvers
	// that speak all three.
	w = append(w, load("fra", "10.0.0.9", "udp", 0, 100, transport.ConnInfo{}), load("fra", "10.0.0.9", "doq", 0, 900, transport.ConnInfo{}))
	failed := load("fra", "10.0.0.1", "doq", 99, 0, transport.ConnInfo{})
	failed.Status = "warm-up-failed"
	w = append(w, failed)

	rels := w.Relatives()
	var doq, doh *Relative
	for i := range rels {
		if rels[i].Scope == "all" && rels[i].Transport == "doq" {
			doq = &rels[i]
		}
		if rels[i].Scope == "all" && rels[i].Transport == "doh2" {
			doh = &rels[i]
		}
	}
	require.NotNil(t, doq)
	require.Len(t, doq.FCP, 20, "pairs")
	require.InDelta(t, 10, doq.FCPq[0].Value, 1e-9)
	require.InDelta(t, 20, doh.PLTq[2].Value, 1e-9)
	require.True(t, doq.FCPq[0].Bounded())
	regions := 0
	for _, r := range rels {
		if r.Scope == "region" {
			require.Equal(t, "EU", r.Group, "the region from the targets file's note")
			regions++
		}
	}
	require.Equal(t, 2, regions, "DoH and DoQ in region EU")

	// The absolutes beside the ratios: DoUDP's medians in ms, with
	// their intervals, over the loads that loaded.
	abs := w.Absolutes()
	require.Equal(t, "all", abs[0].Scope)
	require.Equal(t, "udp", abs[0].Transport)
	require.Equal(t, 21, abs[0].FCP.N)
	require.InDelta(t, 109, abs[0].FCP.Median, 1e-9)
	require.InDelta(t, 218, abs[0].PLT.Median, 1e-9)
	require.True(t, abs[0].PLT.Bounded())
	var table strings.Builder
	require.NoError(t, w.WriteTable(&table))
	require.Regexp(t, `all\s+udp\s+21\s+109 \[`, table.String())

	ov := w.Overview()
	require.Equal(t, "nothing: names in clear", ov[0].Hides, "DoUDP's rung")
	require.Equal(t, "doh2", ov[1].Transport)
	require.Equal(t, "names from the network", ov[1].Hides)
	q := ov[2]
	require.Equal(t, "doq", q.Transport)
	require.Equal(t, 23, q.Loads)
	require.Equal(t, 22, q.OK)
	require.InDelta(t, 20.0/22, q.Resumed, 1e-9)
	require.InDelta(t, 10.0/22, q.Token, 1e-9)
	require.Equal(t, "v1 100%", q.Versions)
	require.Equal(t, "warm-up-failed (1)", q.FailReason)

	fs := experiment.Earn(w.Findings(), experiment.Evidence{})
	require.Len(t, fs, 2)
	for _, f := range fs {
		require.Equal(t, experiment.Holds, f.Verdict, "%s: %s %s", f.Claim, f.Here, f.Reason)
	}
	require.Equal(t, experiment.NoData, Wild{}.Findings()[0].Verdict)
	_ = time.Second
}

// TestPageRecordsCountEachPageOnce: a page counts once over its loads;
// its HTTPS record is read from the warm-up's lookups as well (the
// measured navigation's may come from the stub's cache); only the page's
// own host counts; a page whose HTTPS lookup failed is not asked.
func TestPageRecordsCountEachPageOnce(t *testing.T) {
	https := func(host string, st transport.Status, answers ...string) *server.Record {
		return &server.Record{QName: host, QType: "HTTPS", Upstream: &transport.Record{Status: st, Answers: answers}}
	}
	load := func(page string, warm, measured []*server.Record) wildPoint {
		x := &wildLoad{PageLoad: &campaign.PageLoad{Task: measure.Task{Page: page, Transport: "doq"}, Status: "ok"}}
		x.Sample, x.WarmStub, x.Stub = &pages.Sample{Status: "ok"}, warm, measured
		return pointOfWild(x)
	}
	echRR := "a.example.\t300\tIN\tHTTPS\t1 . alpn=\"h3,h2\" ech=\"AEX+DQBB\""
	w := Wild{
		load("https://a.example/", []*server.Record{https("a.example.", transport.StatusOK, echRR)}, nil),
		load("https://a.example/", nil, nil), // the same page again: counted once
		load("https://b.example/x", nil, []*server.Record{https("b.example.", transport.StatusOK, "b.example.\t300\tIN\tHTTPS\t1 . alpn=\"h2\"")}),
		load("https://c.example/", nil, []*server.Record{https("c.example.", transport.StatusOK)}),            // NODATA: no record
		load("https://d.example/", nil, []*server.Record{https("cdn.d.example.", transport.StatusOK, echRR)}), // another host's
		load("https://e.example/", nil, []*server.Record{https("e.example.", transport.StatusTimeout)}),
	}
	p := w.PageRecords()
	require.Equal(t, 3, p.Asked, "a, b and c: d's own host was never asked, e's lookup failed")
	require.Equal(t, [2]int{2, 1}, [2]int{p.HTTPS.K, p.ECH.K})
	require.InDelta(t, 1.0/3, p.ECH.P, 1e-12)
	require.Equal(t, "of 3 pages whose HTTPS lookup was answered, 2 have an HTTPS record, 66.7 % (95 % CI 20.8–93.9 %), and 1 an ECH config in it, 33.3 % (95 % CI 6.1–79.2 %)", p.String())
	require.Equal(t, "no page's HTTPS lookup was answered", Wild{}.PageRecords().String())
}

// TestWildDecodedForAnalysisReportsAlike: a campaign load decoded for
// analysis (the navigations and the warm-up's records left undecoded)
// gives the overview, times and pages' DNS the whole load gives, and
// keeps neither the loader's record nor the warm-up's stub records.
func TestWildDecodedForAnalysisReportsAlike(t *testing.T) {
	echRR := "a.example.\t300\tIN\tHTTPS\t1 . ech=\"AEX+DQBB\""
	var raws [][]byte
	for i, tr := range []string{"udp", "doq"} {
		wl := WildLoad{Sample: &pages.Sample{Task: pages.Task{Page: "https://a.example/", Transport: tr}, Status: "ok", FCPMs: 100 + float64(i), PLTMs: 200,
			Load: &browser.Load{Protocol: "h3", PLTMs: 200}, WarmUp: &browser.Load{Protocol: "h3"},
			DNS: []*server.Record{{QName: "a.example.", QType: "A"}}},
			Stub:     []*server.Record{{QName: "a.example.", QType: "A", Upstream: &transport.Record{Status: transport.StatusOK, Conn: transport.ConnInfo{TLSResumed: i == 1, QUICVersion: "v1"}}}},
			WarmStub: []*server.Record{{QName: "a.example.", QType: "HTTPS", Upstream: &transport.Record{Status: transport.StatusOK, Answers: []string{echRR}}}}}
		load, err := json.Marshal(wl)
		require.NoError(t, err)
		raw, err := json.Marshal(campaign.PageLoad{Task: measure.Task{Page: "https://a.example/", Transport: tr, Target: "10.0.0.1"}, Status: "ok", FCPMs: 100 + float64(i), PLTMs: 200,
			Vantage: &measure.Vantage{Name: "fra"}, Load: load})
		require.NoError(t, err)
		raws = append(raws, raw)
	}
	var whole, lean Wild
	var wholeLoads []*wildLoad
	for _, raw := range raws {
		x, err := decodeWild("r", raw, false)
		require.NoError(t, err)
		whole, wholeLoads = append(whole, pointOfWild(x)), append(wholeLoads, x)
		y, err := decodeWild("r", raw, true)
		require.NoError(t, err)
		require.Nil(t, y.PageLoad.Load)
		require.Nil(t, y.WarmStub)
		require.Nil(t, y.Stub)
		require.Equal(t, x.upstream(), y.upstream(), "what the stub did upstream, alike")
		require.Nil(t, y.Sample.Load)
		lean = append(lean, pointOfWild(y))
	}
	require.NotNil(t, wholeLoads[0].Sample.Load, "the whole load keeps its navigation")
	require.Equal(t, whole, lean, "the same points")
	require.Equal(t, whole.Overview(), lean.Overview())
	require.Equal(t, whole.Absolutes(), lean.Absolutes())
	require.Equal(t, whole.PageRecords(), lean.PageRecords())
	require.Equal(t, 1, lean.PageRecords().ECH.K)
}

// TestWildResolverIsWhoAnswers: a campaign load's resolver is the host
// that answers, so a load over ODoH pairs with its target's DoUDP twin,
// not with its proxy.
func TestWildResolverIsWhoAnswers(t *testing.T) {
	for target, want := range map[string]string{
		"10.0.0.1":        "10.0.0.1",
		"[2001:db8::1]":   "2001:db8::1",
		"quic://10.0.0.1": "10.0.0.1",
		"odoh://10.0.0.9/dns-query?target=10.0.0.1:443/dns-query": "10.0.0.1",
	} {
		x := &wildLoad{PageLoad: &campaign.PageLoad{Task: measure.Task{Target: target}}}
		require.Equal(t, want, x.resolver(), target)
	}
}

// TestWildRegionAndShares: a resolver's region is its targets file's
// note (region=EU, wherever the note puts it; none without one), and
// shares print largest first, ties by name.
func TestWildRegionAndShares(t *testing.T) {
	for note, want := range map[string]string{
		"10.0.0.53 # region=EU":             "EU",
		"10.0.0.53 # anycast, region=AP-SE": "AP-SE",
		"10.0.0.53 # region=NA; operator=x": "NA",
		"10.0.0.53 # subregion=EU":          "",
		"10.0.0.53":                         "",
	} {
		x := &wildLoad{PageLoad: &campaign.PageLoad{Resolver: note}}
		require.Equal(t, want, x.region(), note)
	}
	require.Equal(t, "v1 50%, draft-29 25%, v2 25%", shares(map[string]int{"v2": 1, "v1": 2, "draft-29": 1}))
	require.Empty(t, shares(nil))
}

// TestWildRow: a campaign load's export row: its vantage point and the
// resolver as its host (an ODoH target's, not its proxy's), the
// loader's protocol and lookups, FCP, PLT and TTFB only where it loaded
// (a failed load's are empty, not 0), the stub's upstream exchanges
// counted by what each did, the first one's QUIC version and ALPN, and
// the job's attempt.
func TestWildRow(t *testing.T) {
	start := time.Date(2026, 11, 29, 18, 0, 0, 0, time.FixedZone("", 3600))
	x := &wildLoad{PageLoad: &campaign.PageLoad{Task: measure.Task{Target: "odoh://10.0.0.9/dns-query?target=10.0.0.1:443/dns-query", URL: "odoh://10.0.0.9/dns-query?target=10.0.0.1:443/dns-query",
		Transport: "odoh", Page: "https://a.example/", Round: 2, Rep: 1}, Start: start, Status: "ok",
		Vantage: &measure.Vantage{Name: "fra", Location: "Frankfurt, DE"}, Job: &measure.JobInfo{Attempt: 2}}}
	x.Sample = &pages.Sample{Status: "ok", FCPMs: 120, PLTMs: 340, Lookups: 3, Load: &browser.Load{Protocol: "h3", TTFBMs: 80}}
	x.Stub = []*server.Record{
		{Upstream: &transport.Record{Status: transport.StatusOK, Conn: transport.ConnInfo{QUICVersion: "v1", ALPN: "doq", TLSResumed: true, Used0RTT: true}}},
		{}, // answered from the stub's cache: no exchange
		{Upstream: &transport.Record{Status: transport.StatusOK, Conn: transport.ConnInfo{QUICVersion: "v2", ALPN: "h3", Retry: true, TokenUsed: true}}},
	}
	r := wildRow("campaign-x", x)
	require.Equal(t, WildRow{RunID: "campaign-x", StartedAt: start.UTC(), Vantage: "fra", VantageLocation: "Frankfurt, DE", Resolver: "10.0.0.1",
		URL: x.URL, Transport: "odoh", Page: "https://a.example/", Round: 2, Rep: 1, Status: "ok", Protocol: "h3", FCPMs: ptr(120), PLTMs: ptr(340), TTFBMs: ptr(80),
		Lookups: 3, Exchanges: 2, Resumed: 1, ZeroRTT: 1, Retry: 1, Token: 1, QUICVersion: "v1", ALPN: "doq", JobAttempt: 2}, r)

	x.up = nil // read again, as a failed load
	x.Status, x.Error = "timeout", "navigation timed out"
	r = wildRow("campaign-x", x)
	require.Nil(t, r.FCPMs)
	require.Nil(t, r.PLTMs)
	require.Nil(t, r.TTFBMs)
	require.Equal(t, []any{"timeout", "navigation timed out", int64(3)}, []any{r.Status, r.Error, r.Lookups})
}

func ptr(v float64) *float64 { return &v }

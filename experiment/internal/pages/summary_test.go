package pages

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/server"
)

// load is one OK 0-RTT load of insta on fiber over DoUDP by engine, its
// connection validated by a token or not.
func load(engine string, plt float64, token bool) *Sample {
	t := Task{Profile: "fiber", Page: "insta", Transport: "udp", StubState: "cold", H3: "0rtt", DNSMode: "stub"}
	if engine != EngineChromium {
		t.Engine = engine
	}
	return &Sample{Task: t, Status: "ok", PLTMs: plt, H3Conn: &server.Record{TokenUsed: token}}
}

// TestFidelityMatchesTokens: a load with a token is a round trip faster
// than one without, and which it is is a coin flip for both engines, so
// the engines are compared under one mix of the two; where an engine
// lacks one kind, on the kind both have; where they share none, or all
// loads are of one kind, the plain medians are compared.
func TestFidelityMatchesTokens(t *testing.T) {
	loads := []*Sample{
		// Chromium: 1 of 3 with a token; the loader: 2 of 3, as fast.
		load(EngineChromium, 100, true), load(EngineChromium, 200, false), load(EngineChromium, 210, false),
		load(EngineDoxlab, 100, true), load(EngineDoxlab, 104, true), load(EngineDoxlab, 205, false),
	}
	cells := Summarize(loads)
	require.Len(t, cells, 2)
	require.InDelta(t, 1.0/3, cells[0].Token(), 1e-9, "chromium's share of loads with a token")
	require.InDelta(t, 2.0/3, cells[1].Token(), 1e-9)

	f := CompareEngines(cells)
	require.Len(t, f.Cells, 1)
	c := f.Cells[0]
	require.True(t, c.Matched)
	// Both engines weighted 3 of 6 with a token (the median of an even
	// count is the mean of the middle two): chromium 0.5·100 + 0.5·205,
	// the loader 0.5·102 + 0.5·205.
	require.InDelta(t, 152.5, c.Chromium, 1e-9)
	require.InDelta(t, 153.5, c.Doxlab, 1e-9)
	require.InDelta(t, 100*(153.5/152.5-1), c.ErrPct, 1e-9)
	require.InDelta(t, 100*(104.0/200-1), c.RawErrPct, 1e-9, "the plain medians are a round trip apart")
	require.Equal(t, 1, f.Matched)

	// No load of Chromium's had a token: the loads without one compared.
	loads[0].H3Conn.TokenUsed = false
	c = CompareEngines(Summarize(loads)).Cells[0]
	require.True(t, c.Matched)
	require.InDelta(t, 200, c.Chromium, 1e-9)
	require.InDelta(t, 205, c.Doxlab, 1e-9)
	require.InDelta(t, 100*(104.0/200-1), c.RawErrPct, 1e-9)

	// Nor any of the loader's: nothing to match.
	loads[3].H3Conn.TokenUsed, loads[4].H3Conn.TokenUsed = false, false
	c = CompareEngines(Summarize(loads)).Cells[0]
	require.False(t, c.Matched)
	require.InDelta(t, 104, c.Doxlab, 1e-9)
	require.Equal(t, c.RawErrPct, c.ErrPct)
}

// TestRankingApart: two configurations ordered differently by the
// engines count against the ranking only when either engine's loads
// tell them apart.
func TestRankingApart(t *testing.T) {
	group := func(chUDP, chDoQ, dxUDP, dxDoQ []float64) FidelitySummary {
		var loads []*Sample
		add := func(engine, tr string, plts []float64) {
			for _, v := range plts {
				x := load(engine, v, false)
				x.Transport = tr
				loads = append(loads, x)
			}
		}
		add(EngineChromium, "udp", chUDP)
		add(EngineChromium, "doq", chDoQ)
		add(EngineDoxlab, "udp", dxUDP)
		add(EngineDoxlab, "doq", dxDoQ)
		return CompareEngines(Summarize(loads))
	}
	// Chromium: DoQ a clear 100 ms slower; the loader has it faster.
	f := group([]float64{100, 101, 102, 103, 104}, []float64{200, 201, 202, 203, 204},
		[]float64{150, 151, 152, 153, 154}, []float64{140, 141, 142, 143, 144})
	require.Equal(t, 1, f.Groups)
	require.InDelta(t, 100*2.0/102, f.Cells[0].ChromiumIQRPct(), 1e-9, "101 to 103 around a median of 102")
	require.Equal(t, 0, f.SameRanking)
	require.Equal(t, 0, f.SameRankingApart)
	require.Equal(t, 0, f.SameRankingChromiumApart)
	require.Len(t, f.Conflicts, 1)
	require.Contains(t, f.Conflicts[0], "insta/fiber/cold: udp/0rtt against doq/0rtt")
	require.Contains(t, f.Conflicts[0], "apart by both engines' loads")

	// Only the loader's steady loads tell them apart; Chromium's overlap
	// and their medians fall the other way: a conflict of the loader's
	// order with noise, not with an order the browser showed.
	f = group([]float64{100, 119, 130, 141, 159}, []float64{101, 120, 131, 140, 160},
		[]float64{130, 130.5, 131, 131.5, 132}, []float64{125, 125.5, 126, 126.5, 127})
	require.Equal(t, 0, f.SameRankingApart)
	require.Equal(t, 1, f.SameRankingChromiumApart)
	require.Len(t, f.Conflicts, 1)
	require.Contains(t, f.Conflicts[0], "apart by doxlab's loads")

	// Both within each other's spread on both engines: the medians'
	// order differs, but there is no order to agree on.
	f = group([]float64{100, 110, 120, 130, 140}, []float64{105, 115, 125, 135, 145},
		[]float64{100, 110, 121, 130, 140}, []float64{105, 115, 119, 135, 145})
	require.Equal(t, 0, f.SameRanking, "the strict ranking still differs")
	require.Equal(t, 1, f.SameRankingApart)
	require.Equal(t, 1, f.SameRankingChromiumApart)
	require.Empty(t, f.Conflicts)
}

// TestChromiumSplitHalf compares Chromium's even repetitions with its
// odd ones, cell by cell, leaving the loader's loads out and the
// samples as they were.
func TestChromiumSplitHalf(t *testing.T) {
	var loads []*Sample
	for rep, plt := range []float64{100, 110, 102, 112} {
		x := load(EngineChromium, plt, true)
		x.Rep = rep
		loads = append(loads, x)
	}
	loads = append(loads, load(EngineDoxlab, 500, true))
	f := ChromiumSplitHalf(loads)
	require.Len(t, f.Cells, 1)
	c := f.Cells[0]
	require.InDelta(t, 101, c.Chromium, 1e-9, "reps 0 and 2: the mean of the two")
	require.InDelta(t, 111, c.Doxlab, 1e-9, "reps 1 and 3")
	require.InDelta(t, 100*(111.0/101-1), f.MAPE, 1e-9)
	require.Equal(t, EngineChromium, loads[1].EngineName(), "the samples are left as they were")
	require.Equal(t, 1, loads[1].Rep)
}

// TestSummarizeAgainstItsOwnBaseline: a cell's change is read against
// DoUDP + H3 1-RTT of the same profile, page, stub state, DNS mode,
// engine and setup; the doxlab loader (no paints) has no FCP change; a
// cell without a baseline, or whose loads all failed, has none to show
// (NaN, "–"), never −100 %; the shares are of the ok loads and the 0-RTT
// share of connections is over all the loads' connections.
func TestSummarizeAgainstItsOwnBaseline(t *testing.T) {
	load := func(tr, h3, engine string, plt, fcp float64) *Sample {
		x := &Sample{Task: Task{Profile: "fiber", Page: "wiki", Transport: tr, H3: h3, StubState: "warm", DNSMode: "stub", Engine: engine}, Status: "ok", PLTMs: plt, FCPMs: fcp}
		x.Origins = []OriginFacts{{Host: "wiki.test", Requests: 3, Protocol: "h3", Lookup: LookupUpstream, Conns: 2, Conns0RTT: 1}}
		return x
	}
	var ss []*Sample
	for i := range 4 {
		d := float64(i)
		ss = append(ss, load("udp", "1rtt", "", 400+d, 200+d), load("doq", "0rtt", "", 440+d, 210+d),
			load("udp", "1rtt", EngineDoxlab, 100+d, 0), load("doq", "0rtt", EngineDoxlab, 120+d, 0))
	}
	ss[1].H3Used0RTT, ss[1].H3Conn = true, &server.Record{TokenUsed: true}
	orphan := load("doh2", "1rtt", "", 500, 250)
	orphan.Page = "o20" // no DoUDP baseline for this page
	failed := load("doh2", "1rtt", "", 0, 0)
	failed.Status = "timeout"
	ss = append(ss, orphan, failed)

	cells := Summarize(ss)
	by := map[string]Cell{}
	for _, c := range cells {
		by[c.Page+" "+c.Transport+" "+c.Engine] = c
	}
	doq := by["wiki doq chromium"]
	require.Equal(t, 4, doq.OK)
	require.InDelta(t, 100*(441.5/401.5-1), doq.RelPLT, 1e-9)
	require.InDelta(t, 100*(211.5/201.5-1), doq.RelFCP, 1e-9)
	require.Equal(t, 0.25, doq.Real0RTT)
	require.Equal(t, 0.25, doq.Token())
	require.Equal(t, 0.5, doq.Conns0RTT, "one of each load's two connections")
	require.Len(t, doq.RelPLTs, 4)

	dx := by["wiki doq doxlab"]
	require.InDelta(t, 100*(121.5/101.5-1), dx.RelPLT, 1e-9, "against the loader's own baseline, not Chromium's")
	require.True(t, math.IsNaN(dx.RelFCP), "the loader paints nothing")

	require.True(t, math.IsNaN(by["o20 doh2 chromium"].RelPLT), "no baseline")
	w := by["wiki doh2 chromium"]
	require.Equal(t, 1, w.N)
	require.Zero(t, w.OK)
	require.True(t, math.IsNaN(w.RelPLT), "no ok load: no change, not -100 %")
	require.True(t, by["wiki udp chromium"].Baseline())
}

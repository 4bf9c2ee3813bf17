package pages

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/internal/order"
)

// Cell is one cell of the web experiment: the medians of one profile
// × page × DNS transport × H3 mode (× stub state × DNS mode).
type Cell struct {
	Profile, Page, Transport, H3, StubState, DNSMode string
	Setup                                            string // Task.Setup
	Engine                                           string // chromium or doxlab
	N, OK                                            int
	PLT, FCP, DNS                                    float64 // medians, ms
	Real0RTT, Resumed                                float64 // shares of OK loads whose H3 connection really used 0-RTT, resumed
	// Tokens says, per OK load as PLTs, whether the server validated its
	// H3 connection by a NEW_TOKEN token: a resumed connection without
	// one has its 0-RTT answer held to three times what the client sent.
	Tokens     []bool
	PLTs, FCPs []float64
	// RelPLT and RelFCP are the median relative increases over the
	// baseline cell (DoUDP + H3 1-RTT, same profile, page, stub state and
	// DNS mode), in percent: the cross-layer paper's Fig. 8-12.
	RelPLT, RelFCP float64
	// RelPLTs are each load's PLT relative to the baseline's median.
	RelPLTs []float64
	// PLTStat and FCPStat are the medians with their 95 % intervals;
	// DeltaPLT and DeltaFCP compare the cell's loads with the baseline's
	// (Mann-Whitney; "~" when not significant).
	PLTStat, FCPStat   stats.Summary
	DeltaPLT, DeltaFCP stats.Comparison
	// DNSStat and the multi-origin medians (Lookups ... NoLookup) with
	// their intervals.
	DNSStat                                                         stats.Summary
	LookupsStat, LookupsBlockingStat, DNSBlockingStat, DNSTotalStat stats.Summary
	ConnsStat, NotH3Stat, NoLookupStat                              stats.Summary
	// Medians of the page's lookups (all, and those a request waited
	// for), of the DNS time on requests' paths and in all, and of the
	// web connections the servers saw (see Sample).
	Lookups, LookupsBlocking, DNSBlocking, DNSTotal, Conns float64
	LookupCounts                                           []float64 // each OK load's lookups
	// Medians per load of the origins not wholly over HTTP/3 and of
	// those requested with no lookup reaching the stub, and the share of
	// all the loads' web connections that used 0-RTT (see OriginFacts).
	NotH3, NoLookup, Conns0RTT float64
}

// Token is the share of OK loads whose connection presented a token.
func (c Cell) Token() float64 {
	if len(c.Tokens) == 0 {
		return 0
	}
	n := 0
	for _, t := range c.Tokens {
		if t {
			n++
		}
	}
	return float64(n) / float64(len(c.Tokens))
}

// MultiOrigin reports whether the cell's page loads from several origins.
// (its loads touched several origins: resolved, or loaded with no
// lookup, as on a connection an ORIGIN frame announced them on).
func (c Cell) MultiOrigin() bool { return c.Lookups+c.NoLookup > 1 }

// Baseline is the cell the others are compared with.
func (c Cell) Baseline() bool { return c.Transport == "udp" && c.H3 == "1rtt" }

// Summarize groups page loads into cells, in a stable order.
func Summarize(samples []*Sample) []Cell { return SummarizePoints(Points(samples)) }

// SummarizePoints groups page loads, as the analysis reads them, into
// cells, in a stable order.
func SummarizePoints(points []Point) []Cell {
	return summarize(points, func(p Point) (CellKey, bool) { return p.Key.Value(), true })
}

// summarize groups the points cellOf puts in a cell.
func summarize(points []Point, cellOf func(Point) (CellKey, bool)) []Cell {
	type key = CellKey
	// What a cell gathers beside its Cell, in one entry: one lookup of
	// its key a load (a key is eight strings to hash), where a map for
	// each thing gathered took five.
	type entry struct {
		c    *Cell
		dns  []float64
		more *[7][]float64 // nil until a load of the cell succeeds
		z    [2]int        // the origins' connections in 0-RTT, and all
	}
	byKey := map[key]*entry{}
	var keys []key
	for _, x := range points {
		k, in := cellOf(x)
		if !in {
			continue
		}
		e, ok := byKey[k]
		if !ok {
			e = &entry{c: &Cell{Profile: k.Profile, Page: k.Page, Transport: k.Transport, H3: k.H3, StubState: k.StubState, DNSMode: k.DNSMode, Engine: k.Engine, Setup: k.Setup}}
			byKey[k] = e
			keys = append(keys, k)
		}
		c := e.c
		c.N++
		if !x.OK() {
			continue
		}
		c.OK++
		c.PLTs = append(c.PLTs, x.PLT)
		c.FCPs = append(c.FCPs, x.FCP)
		e.dns = append(e.dns, x.DNS)
		if e.more == nil {
			e.more = &[7][]float64{}
		}
		e.z[0], e.z[1] = e.z[0]+int(x.OriginConns0RTT), e.z[1]+int(x.OriginConns)
		for i, v := range []float64{float64(x.Lookups), float64(x.LookupsBlocking), x.DNSBlocking, x.DNSTotal, float64(x.Conns), float64(x.NotH3), float64(x.NoLookup)} {
			e.more[i] = append(e.more[i], v)
		}
		if x.Flags&pointReal0RTT != 0 {
			c.Real0RTT++
		}
		if x.Flags&pointResumed != 0 {
			c.Resumed++
		}
		c.Tokens = append(c.Tokens, x.Flags&pointToken != 0)
	}
	cells := make(map[key]*Cell, len(byKey))
	for k, e := range byKey {
		c := e.c
		cells[k] = c
		c.DNSStat = stats.Summarize(e.dns)
		c.PLT, c.FCP, c.DNS = stats.Median(c.PLTs), stats.Median(c.FCPs), c.DNSStat.Median
		if m := e.more; m != nil {
			ss := make([]stats.Summary, len(m))
			for i := range m {
				ss[i] = stats.Summarize(m[i])
			}
			c.LookupsStat, c.LookupsBlockingStat, c.DNSBlockingStat, c.DNSTotalStat, c.ConnsStat, c.NotH3Stat, c.NoLookupStat = ss[0], ss[1], ss[2], ss[3], ss[4], ss[5], ss[6]
			c.Lookups, c.LookupsBlocking, c.DNSBlocking, c.DNSTotal, c.Conns = ss[0].Median, ss[1].Median, ss[2].Median, ss[3].Median, ss[4].Median
			c.LookupCounts = m[0]
			c.NotH3, c.NoLookup = ss[5].Median, ss[6].Median
		}
		if z := e.z; z[1] > 0 {
			c.Conns0RTT = float64(z[0]) / float64(z[1])
		}
		if c.OK > 0 {
			c.Real0RTT /= float64(c.OK)
			c.Resumed /= float64(c.OK)
		}
	}
	for k, c := range cells {
		// A cell with no load that succeeded, or no baseline to compare
		// with, has no change to show: "–", not −100 % or 0.
		c.RelPLT, c.RelFCP = math.NaN(), math.NaN()
		c.PLTStat, c.FCPStat = stats.Summarize(c.PLTs), stats.Summarize(c.FCPs)
		b := k
		b.Transport, b.H3 = "udp", "1rtt"
		base, ok := cells[b] // each engine and setup against its own baseline
		if !ok || base.PLT == 0 || c.OK == 0 {
			c.DeltaPLT, c.DeltaFCP = stats.Compare(nil, nil), stats.Compare(nil, nil)
			continue
		}
		c.DeltaPLT, c.DeltaFCP = stats.Compare(base.PLTs, c.PLTs), stats.Compare(base.FCPs, c.FCPs)
		c.RelPLT = 100 * (c.PLT/base.PLT - 1)
		if base.FCP > 0 && c.FCP > 0 { // the page loader paints nothing
			c.RelFCP = 100 * (c.FCP/base.FCP - 1)
		}
		for _, v := range c.PLTs {
			c.RelPLTs = append(c.RelPLTs, 100*(v/base.PLT-1))
		}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.Setup, b.Setup), order.Compare(a.DNSMode, b.DNSMode), order.Compare(a.StubState, b.StubState), order.Compare(a.Profile, b.Profile),
			order.Compare(a.Page, b.Page), order.Compare(a.Transport, b.Transport), order.Compare(a.H3, b.H3), cmp.Compare(a.Engine, b.Engine))
	})
	out := make([]Cell, len(keys))
	for i, k := range keys {
		out[i] = *cells[k]
	}
	return out
}

// Fidelity compares doxlab's page loader with Chromium on the cells both
// loaded: the loader's median PLT against the browser's, per cell.
type Fidelity struct {
	Profile, Page, Transport, H3, StubState, DNSMode string
	Chromium, Doxlab                                 float64 // median PLTs, ms (token-matched when Matched)
	ErrPct                                           float64 // (doxlab - chromium) / chromium, in percent
	// Matched: the cell's loads differ in whether their connection
	// presented a NEW_TOKEN token, a coin flip for both engines (see
	// pageload.TokensChromium), so each engine's PLT is its median with
	// a token and its median without, weighted alike: by the share of
	// the cell's loads, both engines', that had one. RawErrPct compares
	// the plain medians.
	Matched   bool
	RawErrPct float64

	chPLTs, dxPLTs []float64 // each engine's loads, to tell configurations apart
}

// Test is the Mann-Whitney test that both engines' loads in the cell come
// from one distribution: whether the error is more than noise.
func (f Fidelity) Test() stats.Comparison { return stats.Compare(f.chPLTs, f.dxPLTs) }

// ChromiumIQRPct is the interquartile range of Chromium's loads in the
// cell, in percent of their median: the browser's own spread, to read
// the error against.
func (f Fidelity) ChromiumIQRPct() float64 {
	sorted := slices.Sorted(slices.Values(f.chPLTs))
	return 100 * stats.IQR(sorted) / stats.Quantile(sorted, 0.5)
}

// tokenMatched gives both engines' PLTs under one mix of loads with and
// without a token. Where an engine had loads of one kind only and the
// other of both, they are compared on that kind; ok is false when they
// share no kind, or all their loads were of one kind: then the plain
// medians are the comparison.
func tokenMatched(ch, dx Cell) (chPLT, dxPLT float64, ok bool) {
	split := func(c Cell) (with, without []float64) {
		for i, v := range c.PLTs {
			if i < len(c.Tokens) && c.Tokens[i] {
				with = append(with, v)
			} else {
				without = append(without, v)
			}
		}
		return with, without
	}
	chT, chN := split(ch)
	dxT, dxN := split(dx)
	all := func(a ...[]float64) bool {
		for _, x := range a {
			if len(x) == 0 {
				return false
			}
		}
		return true
	}
	switch {
	case all(chT, chN, dxT, dxN):
		w := float64(len(chT)+len(dxT)) / float64(len(ch.PLTs)+len(dx.PLTs))
		mix := func(with, without []float64) float64 {
			return w*stats.Median(with) + (1-w)*stats.Median(without)
		}
		return mix(chT, chN), mix(dxT, dxN), true
	case (len(chN) == 0 && len(dxN) == 0) || (len(chT) == 0 && len(dxT) == 0):
		return ch.PLT, dx.PLT, false // one kind: nothing to match
	case all(chT, dxT):
		return stats.Median(chT), stats.Median(dxT), true
	case all(chN, dxN):
		return stats.Median(chN), stats.Median(dxN), true
	}
	return ch.PLT, dx.PLT, false
}

// FidelitySummary is the error over all cells, and whether the loader
// ranks the configurations of each (page, profile) as the browser does.
type FidelitySummary struct {
	Cells         []Fidelity
	MAPE, MaxAbs  float64 // mean and largest absolute error, percent
	SameRanking   int     // (page, profile, stub, dns mode) groups ranked alike
	Groups        int
	Disagreements []string // the groups ranked differently, as "page/profile: chromium order vs doxlab order"
	CellsWithin5  int
	CellsWithin10 int
	// Matched cells compared loads with and without a token alike;
	// RawMAPE is the mean absolute error of the plain medians.
	Matched int
	RawMAPE float64
	// SameRankingApart counts the groups where every two configurations
	// that either engine's own loads tell apart (MannWhitneyP below
	// ApartP) are ordered alike by both: configurations within each
	// other's spread have no order to agree on. SameRankingChromiumApart
	// asks it only of the pairs Chromium's loads tell apart: where the
	// loader's steadier loads tell two configurations apart and the
	// browser's do not, the browser's order is noise. Conflicts lists
	// the pairs ordered differently, and whose loads told them apart.
	SameRankingApart         int
	SameRankingChromiumApart int
	Conflicts                []string
}

// ApartP is the p-value below which an engine's loads tell two
// configurations apart.
const ApartP = 0.05

// ApartP is the package's ApartP, for templates.
func (FidelitySummary) ApartP() float64 { return ApartP }

// ChromiumSplitHalf compares Chromium's loads with themselves, as
// CompareEngines compares the engines: in each cell its loads of even
// repetitions against those of odd ones. That is the agreement the
// browser's own spread allows: two halves of its loads of one cell,
// minutes apart, differ by that much, and rank the configurations of a
// group alike that often.
func ChromiumSplitHalf(samples []*Sample) FidelitySummary {
	return ChromiumSplitHalfPoints(Points(samples))
}

// ChromiumSplitHalfPoints is ChromiumSplitHalf of page loads as the
// analysis reads them.
func ChromiumSplitHalfPoints(points []Point) FidelitySummary {
	return CompareEngines(summarize(points, func(x Point) (CellKey, bool) {
		k := x.Key.Value()
		if k.Engine != EngineChromium {
			return k, false
		}
		if x.Rep%2 == 1 {
			k.Engine = EngineDoxlab
		}
		return k, true
	}))
}

// CompareEngines pairs each cell loaded by both engines.
func CompareEngines(cells []Cell) FidelitySummary {
	type key struct{ p, g, t, h, s, d, x string }
	byEngine := map[string]map[key]Cell{}
	var keys []key
	for _, c := range cells {
		k := key{c.Profile, c.Page, c.Transport, c.H3, c.StubState, c.DNSMode, c.Setup}
		if byEngine[c.Engine] == nil {
			byEngine[c.Engine] = map[key]Cell{}
		}
		byEngine[c.Engine][k] = c
		if c.Engine == EngineChromium {
			keys = append(keys, k)
		}
	}
	var s FidelitySummary
	type group struct{ p, g, s, d, x string }
	ranks := map[group][]Fidelity{}
	var groups []group
	for _, k := range keys {
		ch, dx := byEngine[EngineChromium][k], byEngine[EngineDoxlab][k]
		if dx.OK == 0 || ch.OK == 0 || ch.PLT == 0 {
			continue
		}
		f := Fidelity{Profile: k.p, Page: k.g, Transport: k.t, H3: k.h, StubState: k.s, DNSMode: k.d, RawErrPct: 100 * (dx.PLT/ch.PLT - 1),
			chPLTs: ch.PLTs, dxPLTs: dx.PLTs}
		f.Chromium, f.Doxlab, f.Matched = tokenMatched(ch, dx)
		f.ErrPct = 100 * (f.Doxlab/f.Chromium - 1)
		s.Cells = append(s.Cells, f)
		s.RawMAPE += math.Abs(f.RawErrPct)
		if f.Matched {
			s.Matched++
		}
		a := math.Abs(f.ErrPct)
		s.MAPE += a
		s.MaxAbs = max(s.MaxAbs, a)
		if a <= 5 {
			s.CellsWithin5++
		}
		if a <= 10 {
			s.CellsWithin10++
		}
		g := group{k.p, k.g, k.s, k.d, k.x}
		if _, ok := ranks[g]; !ok {
			groups = append(groups, g)
		}
		ranks[g] = append(ranks[g], f)
	}
	if len(s.Cells) > 0 {
		s.MAPE /= float64(len(s.Cells))
		s.RawMAPE /= float64(len(s.Cells))
	}
	name := func(f Fidelity) string { return f.Transport + "/" + f.H3 }
	for _, g := range groups {
		fs := ranks[g]
		if len(fs) < 2 {
			continue
		}
		s.Groups++
		byCh := slices.Clone(fs)
		slices.SortStableFunc(byCh, func(a, b Fidelity) int { return cmp.Compare(a.Chromium, b.Chromium) })
		byDx := slices.Clone(fs)
		slices.SortStableFunc(byDx, func(a, b Fidelity) int { return cmp.Compare(a.Doxlab, b.Doxlab) })
		var co, do []string
		for i := range byCh {
			co, do = append(co, name(byCh[i])), append(do, name(byDx[i]))
		}
		if slices.Equal(co, do) {
			s.SameRanking++
		} else {
			s.Disagreements = append(s.Disagreements, fmt.Sprintf("%s/%s: chromium %v, doxlab %v", g.g, g.p, co, do))
		}
		alike, alikeCh := true, true
		for i, a := range fs {
			for _, b := range fs[i+1:] {
				chApart := stats.MannWhitneyP(a.chPLTs, b.chPLTs) < ApartP
				dxApart := stats.MannWhitneyP(a.dxPLTs, b.dxPLTs) < ApartP
				if !chApart && !dxApart || cmp.Compare(a.Chromium, b.Chromium) == cmp.Compare(a.Doxlab, b.Doxlab) {
					continue
				}
				alike = false
				by := "doxlab's"
				switch {
				case chApart && dxApart:
					by = "both engines'"
				case chApart:
					by = "chromium's"
				}
				if chApart {
					alikeCh = false
				}
				s.Conflicts = append(s.Conflicts, fmt.Sprintf("%s/%s/%s: %s against %s, chromium %.1f and %.1f ms, doxlab %.1f and %.1f (apart by %s loads)",
					g.g, g.p, g.s, name(a), name(b), a.Chromium, b.Chromium, a.Doxlab, b.Doxlab, by))
			}
		}
		if alike {
			s.SameRankingApart++
		}
		if alikeCh {
			s.SameRankingChromiumApart++
		}
	}
	return s
}

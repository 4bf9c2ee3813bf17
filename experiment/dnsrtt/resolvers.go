package dnsrtt

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"

	"github.com/doxlab/doxlab/internal/printable"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/stats"
)

// ResolverStat is one resolver (target) × transport × condition, over
// every profile and vantage point: the total of the answered exchanges
// and where the resolver ranks among those measured the same way.
type ResolverStat struct {
	Target, Transport, Condition string
	// Rank is 1 for the lowest median total of its transport and
	// condition, among the resolvers that answered; 0 for one that did
	// not.
	Rank   int
	N, OK  int            // samples, answered samples
	Failed map[string]int // the others, by rcode or status
	Ms     stats.Summary  // total ms of the answered exchanges
	RTT    stats.Summary  // total in RTTs of the probe
	Probe  stats.Summary  // probed RTT, ms
	// VsFastest compares the resolver's totals with the fastest one's
	// (Mann-Whitney): is it really slower, or is the order noise?
	VsFastest stats.Comparison
}

// MaxResolverLines is how many resolvers the per-resolver figure
// draws: the most measured. Past a dozen, lines cannot be told apart.
const MaxResolverLines = 12

// MaxResolverRows is how many resolvers of each transport and condition
// the per-resolver tables list, the fastest; every one is in the
// report's JSON (table "resolvers") and in doxlab export.
const MaxResolverRows = 20

// targets are the resolvers the samples name, in order.
func (s *Samples) targets() []string {
	seen := map[string]bool{}
	var keys []string
	for _, c := range s.Groups {
		if !seen[c.Target] && c.Target != OtherResolvers {
			seen[c.Target] = true
			keys = append(keys, c.Target)
		}
	}
	slices.Sort(keys)
	return keys
}

// mostMeasured are at most n of the resolvers (resolverNames), those
// with the most answered exchanges, in order of their names; and
// how many resolvers there are.
func (s *Samples) mostMeasured(n int) (names map[string]string, top []string, all int) {
	names, order := s.resolverNames()
	if len(order) <= n {
		return names, order, len(order)
	}
	answered := map[string]int{}
	for _, c := range s.Groups {
		answered[names[c.Target]] += c.MsAll.N()
	}
	most := slices.Clone(order)
	slices.SortStableFunc(most, func(a, b string) int { return cmp.Compare(answered[b], answered[a]) })
	most = most[:n]
	return names, slices.DeleteFunc(order, func(r string) bool { return !slices.Contains(most, r) }), len(order)
}

// ByResolver summarizes the samples per resolver, transport and
// condition, ranked within each transport and condition; nil unless the
// samples name more than one resolver. It is computed once.
func (s *Samples) ByResolver() []ResolverStat {
	if s.resolvers == nil {
		s.resolvers = s.byResolver()
	}
	return *s.resolvers
}

// shownResolvers are ByResolver's rows a table lists, and how many it
// leaves out. When every row fits, each resolver's rows are together, in
// order of their names (as the figure's legend), its transports and conditions in
// the protocol table's order (the rank says where it stands among the
// others); past MaxResolverRows resolvers the table lists the fastest of
// each transport and condition, in rank order.
func (s *Samples) shownResolvers() ([]ResolverStat, int) {
	var out []ResolverStat
	left := 0
	for _, x := range s.ByResolver() {
		if x.Rank > MaxResolverRows {
			left++
			continue
		}
		out = append(out, x)
	}
	if left == 0 {
		names, given := s.resolverNames()
		at := func(target string) int { return slices.Index(given, names[target]) }
		slices.SortStableFunc(out, func(a, b ResolverStat) int {
			return cmp.Or(cmp.Compare(at(a.Target), at(b.Target)), order.Compare(a.Transport, b.Transport), order.Compare(a.Condition, b.Condition))
		})
	}
	return out, left
}

func (s *Samples) byResolver() *[]ResolverStat {
	out := []ResolverStat{}
	if len(s.targets()) < 2 {
		return &out
	}
	type key struct{ target, tr, cond string }
	own := filter(s.Groups, func(c *Group) bool { return c.Target != OtherResolvers })
	keys, groups := pool(own, func(c *Group) key { return key{c.Target, c.Transport, c.Condition} })
	totals := map[key]*stats.Dist{}
	for _, k := range keys {
		g := groups[k]
		st := ResolverStat{Target: k.target, Transport: k.tr, Condition: k.cond, N: g.N, OK: g.Answered, Failed: g.Failed}
		totals[k] = g.MsAll
		st.Ms, st.RTT, st.Probe = g.MsAll.Summary(), g.RTT.Summary(), g.Probe.Summary()
		out = append(out, st)
	}
	// Rank within each transport and condition, fastest median first;
	// resolvers with nothing answered last.
	slices.SortStableFunc(out, func(a, b ResolverStat) int {
		return cmp.Or(order.Compare(a.Condition, b.Condition), order.Compare(a.Transport, b.Transport),
			cmp.Compare(b2i(a.Ms.N == 0), b2i(b.Ms.N == 0)), cmp.Compare(a.Ms.Median, b.Ms.Median), cmp.Compare(a.Target, b.Target))
	})
	for i := range out {
		switch {
		case out[i].Ms.N == 0: // nothing answered: no rank, no comparison
		case i == 0 || out[i].Transport != out[i-1].Transport || out[i].Condition != out[i-1].Condition:
			out[i].Rank = 1
		default:
			out[i].Rank = out[i-1].Rank + 1
		}
	}
	var fastest *stats.Dist
	var fastestKey key
	for i := range out {
		x := &out[i]
		if x.Rank == 1 {
			fastestKey = key{x.Target, x.Transport, x.Condition}
			fastest = totals[fastestKey]
		}
		if x.Rank > 1 {
			in := func(k key) func(*store.Row) bool {
				return func(r *store.Row) bool { return r.Target == k.target && r.Transport == k.tr && r.Condition == k.cond }
			}
			x.VsFastest = s.compare(fastest, totals[key{x.Target, x.Transport, x.Condition}], in(fastestKey), in(key{x.Target, x.Transport, x.Condition}), totalMs)
		}
	}
	return &out
}

// RankText is the rank, "–" for a resolver that answered nothing.
func (x ResolverStat) RankText() string {
	if x.Rank == 0 {
		return stats.None
	}
	return strconv.Itoa(x.Rank)
}

// VsText is the comparison with the fastest resolver as a table says it.
func (x ResolverStat) VsText() string {
	switch x.Rank {
	case 0:
		return "nothing answered"
	case 1:
		return "fastest"
	}
	return x.VsFastest.FormatDelta()
}

// totalMs is a row's total in ms, if it has one.
func totalMs(r *store.Row) (float64, bool) {
	if r.TotalMs == nil {
		return 0, false
	}
	return *r.TotalMs, true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeResolvers writes the per-resolver table, if the samples name
// more than one resolver.
func (s *Samples) writeResolvers(w io.Writer) {
	rs, left := s.shownResolvers()
	if len(rs) == 0 {
		return
	}
	tw := len("resolver")
	for _, x := range rs {
		tw = max(tw, len(x.Target))
	}
	what := "each resolver's transports together"
	if left > 0 {
		what = "the fastest of each transport and condition"
	}
	fmt.Fprintf(w, "\nper resolver, %s; rank: within its transport and condition by the median total (ms, answered exchanges, with its 95 %% interval); against the fastest: Mann-Whitney, \"~\" where not significant\n", what)
	fmt.Fprintf(w, "%-4s %-*s %-6s %-8s %9s %9s %-21s %-19s %-19s  %-16s %s\n", "rank", tw, "resolver", "transp", "cond", "answered", "median", "95% CI", "median RTTs", "probe ms", "vs fastest", "failed")
	for _, x := range rs {
		fmt.Fprintf(w, "%-4s %-*s %-6s %-8s %9s %9s %-21s %-19s %-19s  %-16s %s\n", x.RankText(), tw, printable.String(x.Target), x.Transport, x.Condition, fmt.Sprintf("%d/%d", x.OK, x.N),
			stats.F(x.Ms.Median, 2), x.Ms.CI(2), x.RTT.Cell(2), x.Probe.Cell(2), x.VsText(), stats.Counts(x.Failed))
	}
	if left > 0 {
		fmt.Fprintf(w, "%d more rows past the %d fastest of each transport and condition: every one is in the report's JSON (table resolvers) and in doxlab export\n", left, MaxResolverRows)
	}
}

// palette tells resolvers apart within a figure: Okabe-Ito's colours
// with a dash pattern for each round of them, so no two lines share both.
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, color.RGBA{0xd5, 0x5e, 0x00, 0xff}, color.RGBA{0x00, 0x9e, 0x73, 0xff},
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, color.RGBA{0xe6, 0x9f, 0x00, 0xff}, color.RGBA{0x56, 0xb4, 0xe9, 0xff},
	color.RGBA{0x00, 0x00, 0x00, 0xff}, color.RGBA{0xf0, 0xe4, 0x42, 0xff},
}

var paletteDashes = [][]vg.Length{nil, {vg.Points(5), vg.Points(3)}, {vg.Points(1), vg.Points(2)}, {vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}}

// resolverNames names the resolver behind each target (measure.Resolvers:
// the URLs of one host are one resolver, speaking their transports),
// and lists the resolvers in order of their names.
func (s *Samples) resolverNames() (map[string]string, []string) {
	trOf := map[string]string{}
	var targets []string
	for _, c := range s.Groups {
		if _, ok := trOf[c.Target]; !ok && c.Target != OtherResolvers {
			trOf[c.Target] = c.Transport
			targets = append(targets, c.Target)
		}
	}
	names := measure.Resolvers(targets, func(t string) string { return trOf[t] })
	var order []string
	for _, t := range targets {
		if !slices.Contains(order, names[t]) {
			order = append(order, names[t])
		}
	}
	slices.Sort(order)
	return names, order
}

// resolverFigure draws the CDF of the total in ms per resolver, a panel
// per transport (fresh connections; every condition where no fresh one
// was measured), each line with its 95 % band: a resolver has one
// colour and dash in every panel.
func (s *Samples) resolverFigure(set *figure.Set) error {
	if len(s.targets()) < 2 {
		return nil
	}
	names, resolvers, all := s.mostMeasured(MaxResolverLines)
	of := "a panel per transport, a colour per resolver, fresh connections, with 95 % bands (DKW)"
	if len(resolvers) < all {
		held := ""
		if s.Folded > 0 {
			held = " held apart"
		}
		of = fmt.Sprintf("the %d most measured of the %d resolvers%s (every one is in the report's JSON and the export); ", len(resolvers), all, held) + of
	}
	fresh := slices.ContainsFunc(s.Groups, func(c *Group) bool { return c.Condition == "fresh" })
	cells := filter(s.Groups, func(c *Group) bool {
		return (!fresh || c.Condition == "fresh") && c.Target != OtherResolvers && slices.Contains(resolvers, names[c.Target])
	})
	type key struct{ transport, resolver string }
	_, lines := pool(cells, func(c *Group) key { return key{c.Transport, names[c.Target]} })
	trs, _ := pool(cells, func(c *Group) string { return c.Transport })
	slices.SortFunc(trs, order.Compare)
	data := figure.Data{Header: []string{"transport", "resolver", "value", "cdf"}}
	look := func(i int) (color.Color, []vg.Length) {
		return palette[i%len(palette)], paletteDashes[(i/len(palette))%len(paletteDashes)]
	}
	// One legend of every resolver, in a panel of its own; where it is
	// wider than a panel the figure puts it below.
	legend := plot.New()
	for i, r := range resolvers {
		l, err := plotter.NewLine(plotter.XYs{{}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = look(i)
		l.Width = vg.Points(1.5)
		legend.Legend.Add(printable.String(r), l)
	}
	var panels []*plot.Plot
	for _, tr := range trs {
		var ss []*figure.Series
		for i, r := range resolvers {
			c, dashes := look(i)
			sr := &figure.Series{Label: r, Color: c, Dashes: dashes, Band: true, Dist: stats.NewDist()}
			if g, ok := lines[key{tr, r}]; ok {
				sr.Dist = g.MsAll
			}
			ss = append(ss, sr)
		}
		p, d, err := figure.CDFPanel(ss, figure.Label(tr), "DNS exchange (ms)", false)
		if err != nil {
			return err
		}
		for _, row := range d.Rows {
			data.Rows = append(data.Rows, append([]string{tr}, row...))
		}
		p.Legend = plot.NewLegend()
		panels = append(panels, p)
	}
	panels = append(panels, figure.LegendPanel(legend))
	grid := figure.Rows(panels, 4)
	return set.AddGrid(grid, "cdf-total-by-resolver", "CDF of the DNS exchange per resolver", of,
		12*vg.Inch, vg.Length(3.2*float64(len(grid)))*vg.Inch, data)
}

// Cells are the tables' statistics as numbers: per profile, transport
// and condition; per resolver; per vantage point.
func (s *Samples) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, x := range s.Stats() {
		keys := map[string]string{"profile": x.Profile, "transport": x.Transport, "condition": x.Condition}
		for _, m := range []struct {
			name string
			s    stats.Summary
		}{{"total_ms", x.Ms}, {"total_rtt", x.RTT}, {"serial_ms", x.Serial}, {"wire_ms", x.Wire}, {"client_ms", x.Client}} {
			c := experiment.NewCell("dns", keys, m.name, x.N, m.s)
			c.Failed = x.Failed
			out = append(out, c)
		}
	}
	for _, x := range s.ByResolver() {
		keys := map[string]string{"resolver": x.Target, "transport": x.Transport, "condition": x.Condition}
		c := experiment.NewCell("resolvers", keys, "total_ms", x.N, x.Ms)
		c.Rank, c.Failed = x.Rank, x.Failed
		if x.Rank > 1 {
			c = c.Versus("fastest resolver", x.VsFastest)
		}
		out = append(out, c, experiment.NewCell("resolvers", keys, "total_rtt", x.N, x.RTT), experiment.NewCell("resolvers", keys, "probe_ms", x.N, x.Probe))
	}
	for _, x := range s.ByVantage() {
		keys := map[string]string{"vantage": x.Vantage, "resolver": x.Target, "transport": x.Transport}
		c := experiment.NewCell("vantages", keys, "total_ms", x.N, x.Ms)
		c.Failed = x.Failed
		out = append(out, c, experiment.NewCell("vantages", keys, "total_rtt", x.N, x.RTT),
			experiment.NewCell("vantages", keys, "probe_ms", x.N, x.Probe))
	}
	return out
}

package dnsrtt

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"slices"

	"github.com/doxlab/doxlab/internal/printable"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/report/figure"
)

// ResolverStat is one resolver (target) × transport × condition, over
// every profile and vantage point: the total of the answered exchanges
// and where the resolver ranks among those measured the same way.
type ResolverStat struct {
	Target, Transport, Condition string
	// Rank is 1 for the lowest median total of its transport and
	// condition.
	Rank  int
	N, OK int
	Ms    stats.Summary // total ms of the answered exchanges
	RTT   stats.Summary // total in RTTs of the probe
	Probe stats.Summary // probed RTT, ms
	// VsFastest compares the resolver's totals with the fastest one's
	// (Mann-Whitney): is it really slower, or is the order noise?
	VsFastest stats.Comparison
}

// targets are the resolvers the samples name, in order.
func (s *Samples) targets() []string {
	keys, _ := pool(s.Groups, func(c *Group) string { return c.Target })
	slices.Sort(keys)
	return keys
}

// ByResolver summarizes the samples per resolver, transport and
// condition, ranked within each transport and condition; nil unless the
// samples name more than one resolver.
func (s *Samples) ByResolver() []ResolverStat {
	if len(s.targets()) < 2 {
		return nil
	}
	type key struct{ target, tr, cond string }
	keys, groups := pool(s.Groups, func(c *Group) key { return key{c.Target, c.Transport, c.Condition} })
	var out []ResolverStat
	totals := map[key]*stats.Dist{}
	for _, k := range keys {
		g := groups[k]
		st := ResolverStat{Target: k.target, Transport: k.tr, Condition: k.cond, N: g.N, OK: g.MsAll.N()}
		totals[k] = g.MsAll
		st.Ms, st.RTT, st.Probe = g.MsAll.Summary(), g.RTT.Summary(), g.Probe.Summary()
		out = append(out, st)
	}
	// Rank within each transport and condition, fastest median first;
	// resolvers with nothing answered last.
	slices.SortStableFunc(out, func(a, b ResolverStat) int {
		return cmp.Or(order.Compare(a.Condition, b.Condition), order.Compare(a.Transport, b.Transport),
			cmp.Compare(b2i(a.OK == 0), b2i(b.OK == 0)), cmp.Compare(a.Ms.Median, b.Ms.Median), cmp.Compare(a.Target, b.Target))
	})
	for i := range out {
		if i == 0 || out[i].Transport != out[i-1].Transport || out[i].Condition != out[i-1].Condition {
			out[i].Rank = 1
		} else {
			out[i].Rank = out[i-1].Rank + 1
		}
	}
	var fastest *stats.Dist
	for i := range out {
		x := &out[i]
		if x.Rank == 1 {
			fastest = totals[key{x.Target, x.Transport, x.Condition}]
		}
		x.VsFastest = stats.CompareDists(fastest, totals[key{x.Target, x.Transport, x.Condition}])
	}
	return out
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
	rs := s.ByResolver()
	if len(rs) == 0 {
		return
	}
	tw := len("resolver")
	for _, x := range rs {
		tw = max(tw, len(x.Target))
	}
	fmt.Fprintln(w, "\nper resolver, ranked within each transport and condition by the median total (ms, answered exchanges, with its 95 % interval); against the fastest: Mann-Whitney, \"~\" where not significant")
	fmt.Fprintf(w, "%-4s %-*s %-6s %-8s %9s %9s %-21s %-19s %-19s  %s\n", "rank", tw, "resolver", "transp", "cond", "ok", "median", "95% CI", "median RTTs", "probe ms", "vs fastest")
	for _, x := range rs {
		vs := "fastest"
		if x.Rank > 1 {
			vs = x.VsFastest.FormatDelta()
		}
		fmt.Fprintf(w, "%-4d %-*s %-6s %-8s %9s %9s %-21s %-19s %-19s  %s\n", x.Rank, tw, printable.String(x.Target), x.Transport, x.Condition, fmt.Sprintf("%d/%d", x.OK, x.N),
			stats.F(x.Ms.Median, 2), x.Ms.CI(2), x.RTT.Cell(2), x.Probe.Cell(2), vs)
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

// resolverFigure draws the CDF of the total in ms per resolver, a panel
// per transport (fresh connections; every condition where no fresh one
// was measured), each line with its 95 % band.
func (s *Samples) resolverFigure(set *figure.Set) error {
	targets := s.targets()
	if len(targets) < 2 {
		return nil
	}
	fresh := slices.ContainsFunc(s.Groups, func(c *Group) bool { return c.Condition == "fresh" })
	cells := filter(s.Groups, func(c *Group) bool { return !fresh || c.Condition == "fresh" })
	type key struct{ transport, target string }
	_, lines := pool(cells, func(c *Group) key { return key{c.Transport, c.Target} })
	trs, _ := pool(cells, func(c *Group) string { return c.Transport })
	slices.SortFunc(trs, order.Compare)
	data := figure.Data{Header: []string{"transport", "resolver", "value", "cdf"}}
	// One legend of every resolver: a panel's own names only those it
	// drew (a URL target is measured over one transport).
	legend := plot.New()
	look := func(i int) (color.Color, []vg.Length) {
		return palette[i%len(palette)], paletteDashes[(i/len(palette))%len(paletteDashes)]
	}
	for i, tg := range targets {
		l, err := plotter.NewLine(plotter.XYs{{}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = look(i)
		l.Width = vg.Points(1.5)
		legend.Legend.Add(printable.String(tg), l)
	}
	var panels []*plot.Plot
	for _, tr := range trs {
		var ss []*figure.Series
		for i, tg := range targets {
			c, dashes := look(i)
			sr := &figure.Series{Label: tg, Color: c, Dashes: dashes, Band: true, Dist: stats.NewDist()}
			if g, ok := lines[key{tr, tg}]; ok {
				sr.Dist = g.MsAll
			}
			ss = append(ss, sr)
		}
		p, d, err := figure.CDFPanel(ss, tr, "DNS exchange (ms)", false)
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
	return set.AddGrid(grid, "cdf-total-by-resolver", "CDF of the DNS exchange per resolver", "a panel per transport, fresh connections, with 95 % bands (DKW)",
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
			out = append(out, experiment.NewCell("dns", keys, m.name, x.N, m.s))
		}
	}
	for _, x := range s.ByResolver() {
		keys := map[string]string{"resolver": x.Target, "transport": x.Transport, "condition": x.Condition}
		c := experiment.NewCell("resolvers", keys, "total_ms", x.N, x.Ms)
		c.Rank = x.Rank
		if x.Rank > 1 {
			c = c.Versus("fastest resolver", x.VsFastest)
		}
		out = append(out, c, experiment.NewCell("resolvers", keys, "total_rtt", x.N, x.RTT), experiment.NewCell("resolvers", keys, "probe_ms", x.N, x.Probe))
	}
	for _, x := range s.ByVantage() {
		keys := map[string]string{"vantage": x.Vantage, "resolver": x.Target, "transport": x.Transport}
		out = append(out, experiment.NewCell("vantages", keys, "total_ms", x.N, x.Ms), experiment.NewCell("vantages", keys, "total_rtt", x.N, x.RTT),
			experiment.NewCell("vantages", keys, "probe_ms", x.N, x.Probe))
	}
	return out
}

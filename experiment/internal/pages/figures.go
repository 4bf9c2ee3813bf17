package pages

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/report/figure"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// combo is a DNS transport with an HTTP/3 handshake, e.g. "doq + H3 0-RTT".
type combo struct{ transport, h3 string }

func (c combo) String() string {
	p, _ := protocol.Lookup(c.transport)
	name := cmp.Or(p.Label, figure.Labels[c.transport], c.transport)
	return name + " + H3 " + map[string]string{"0rtt": "0-RTT", "1rtt": "1-RTT", "0rtt-wait": "0-RTT wait"}[c.h3]
}

func (c combo) series(values []float64) *figure.Series {
	s := &figure.Series{Label: c.String(), Color: figure.Colors[c.transport], Glyph: figure.Glyphs[c.transport], Values: values}
	switch c.h3 {
	case "0rtt":
		s.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	case "0rtt-wait":
		s.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
	}
	return s
}

// Figures draws the cross-layer paper's relative-PLT figures (Fig. 8, 9,
// 10-11, 12) from cells, for each variant (DNS mode × stub state): the
// web experiment's, and the coalescing experiment's from its own loads.
func Figures(cells []Cell, set *figure.Set) error {
	type variant struct{ mode, state string }
	variants, byVariant := order.Group(cells, func(c Cell) variant { return variant{c.DNSMode, c.StubState} })
	for _, v := range variants {
		cs := byVariant[v]
		tag := v.mode + "-" + v.state
		var profiles, pages []string
		var combos []combo
		seen := map[string]bool{}
		for _, c := range cs {
			if !seen["p"+c.Profile] {
				seen["p"+c.Profile] = true
				profiles = append(profiles, c.Profile)
			}
			if !seen["g"+c.Page] {
				seen["g"+c.Page] = true
				pages = append(pages, c.Page)
			}
			if k := "c" + c.Transport + c.H3; !seen[k] {
				seen[k] = true
				combos = append(combos, combo{c.Transport, c.H3})
			}
		}
		cell := func(profile, page string, cb combo) *Cell {
			for i := range cs {
				c := &cs[i]
				if c.Profile == profile && c.Page == page && c.Transport == cb.transport && c.H3 == cb.h3 {
					return c
				}
			}
			return nil
		}
		about := fmt.Sprintf("DNS %s, stub %s", v.mode, v.state)
		var others []combo // every combination but the baseline
		for _, cb := range combos {
			if cb.transport != "udp" || cb.h3 != "1rtt" {
				others = append(others, cb)
			}
		}
		// Fig. 8: one heat map per combination, profile × page, side by side.
		var heats []*plot.Plot
		heatData := figure.Data{Header: []string{"combination", "profile", "page", "median PLT increase (%)"}}
		var hw, hh vg.Length
		rel := func(cb combo) func(p, g string) float64 {
			return func(p, g string) float64 {
				if c := cell(p, g, cb); c != nil && c.OK > 0 && len(c.RelPLTs) > 0 {
					return c.RelPLT
				}
				return math.NaN()
			}
		}
		scale := 1.0 // one colour scale for all heat maps
		for _, cb := range others {
			scale = max(scale, figure.Extent(profiles, pages, rel(cb)))
		}
		for _, cb := range others {
			p, w, h, d, err := figure.HeatMap(profiles, pages, rel(cb), scale, cb.String(), "access profile", "page")
			if err != nil {
				return err
			}
			for _, row := range d.Rows {
				heatData.Rows = append(heatData.Rows, append([]string{cb.String()}, row...))
			}
			heats = append(heats, p)
			hw, hh = max(hw, w), max(hh, h)
		}
		if len(heats) > 0 && len(profiles)*len(pages) == 1 {
			// One profile and one page: a heat map per combination would
			// be a single cell each; one bar per combination says it.
			var bars []figure.Bar
			for _, cb := range others {
				bars = append(bars, figure.Bar{Label: cb.String(), Value: rel(cb)(profiles[0], pages[0]), Color: figure.Colors[cb.transport]})
			}
			p, w, h, d, err := figure.Bars(bars, pages[0]+", "+profiles[0], "median PLT increase over DoUDP + H3 1-RTT (%)")
			if err != nil {
				return err
			}
			if err := set.Add(p, "fig8-"+tag, "Fig. 8: median PLT increase over DoUDP + H3 1-RTT (%)", about, w, h, d); err != nil {
				return err
			}
		} else if len(heats) > 0 {
			rows := figure.Rows(heats, 3)
			hw, hh = hw*vg.Length(len(rows[0])), hh*vg.Length(len(rows))
			if err := set.AddGrid(rows, "fig8-"+tag, "Fig. 8: median PLT increase over DoUDP + H3 1-RTT (%)", about, hw, hh, heatData); err != nil {
				return err
			}
		}
		// Fig. 9 and 10-11: a grid of CDFs, profile (rows) × page
		// (columns), on one x axis: each load's PLT relative to the
		// baseline's median, and the PLT itself.
		grid := func(name, heading, xlabel string, signed bool, values func(*Cell) []float64, withBaseline bool) error {
			data := figure.Data{Header: []string{"profile", "page", "series", "value", "cdf"}}
			panels := make([][]*plot.Plot, len(profiles))
			lo, hi := math.Inf(1), math.Inf(-1)
			for j, p := range profiles {
				for _, g := range pages {
					var ss []*figure.Series
					for _, cb := range combos {
						if !withBaseline && cb.transport == "udp" && cb.h3 == "1rtt" {
							continue
						}
						if c := cell(p, g, cb); c != nil && len(values(c)) > 0 {
							ss = append(ss, cb.series(slices.Clone(values(c))))
						}
					}
					plt, d, err := figure.CDFPanel(ss, g+", "+p, xlabel, signed)
					if err != nil {
						return err
					}
					for _, row := range d.Rows {
						data.Rows = append(data.Rows, append([]string{p, g}, row...))
					}
					if len(d.Rows) > 0 {
						lo, hi = min(lo, plt.X.Min), max(hi, plt.X.Max)
					}
					if j > 0 || len(panels[0]) > 0 {
						plt.Legend = plot.NewLegend() // one legend, top left
					}
					panels[j] = append(panels[j], plt)
				}
			}
			for _, row := range panels {
				for _, plt := range row {
					if lo < hi {
						plt.X.Min, plt.X.Max = lo, hi
					}
				}
			}
			// The legend gets a column of its own, beside the first row.
			for j := range panels {
				var extra *plot.Plot
				if j == 0 {
					extra = figure.LegendPanel(panels[0][0])
				}
				panels[j] = append(panels[j], extra)
			}
			return set.AddGrid(panels, name, heading, about, vg.Length(3.4*float64(len(pages)+1))*vg.Inch, vg.Length(2.6*float64(len(profiles)))*vg.Inch, data)
		}
		if err := grid("fig9-"+tag, "Fig. 9: each load's PLT relative to DoUDP + H3 1-RTT's median", "PLT increase over the baseline's median (%)", true,
			func(c *Cell) []float64 { return c.RelPLTs }, false); err != nil {
			return err
		}
		if err := grid("fig10-"+tag, "Fig. 10-11: page load time", "PLT (ms)", false,
			func(c *Cell) []float64 { return c.PLTs }, true); err != nil {
			return err
		}
		// Fig. 12: the median relative increase of every (page, profile)
		// tuple, one CDF per combination.
		var tuples []*figure.Series
		for _, cb := range others {
			var vals []float64
			for _, c := range cs {
				if c.Transport == cb.transport && c.H3 == cb.h3 && len(c.RelPLTs) > 0 {
					vals = append(vals, c.RelPLT)
				}
			}
			tuples = append(tuples, cb.series(vals))
		}
		if err := addCDF(set, tuples, "fig12-"+tag, fmt.Sprintf("median PLT increase per (page, profile) over DoUDP + H3 1-RTT (%s)", about),
			"median PLT increase (%)", true, "Fig. 12: median relative PLT over all tuples", about); err != nil {
			return err
		}
	}
	return nil
}

// addCDF draws a CDF into set.
func addCDF(set *figure.Set, ss []*figure.Series, name, title, xlabel string, signed bool, heading, of string) error {
	p, d, err := figure.CDF(ss, title, xlabel, signed)
	if err != nil {
		return err
	}
	return set.Add(p, name, heading, of, figure.CDFWidth, figure.CDFHeight, d)
}

package pages

import (
	"fmt"
	"math"
	"slices"

	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// combo is a DNS transport with an HTTP/3 handshake, e.g. "doq + H3 0-RTT".
type combo struct{ transport, h3 string }

func (c combo) String() string {
	return figure.Label(c.transport) + " + H3 " + map[string]string{"0rtt": "0-RTT", "1rtt": "1-RTT", "0rtt-wait": "0-RTT wait"}[c.h3]
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
	type variant struct{ mode, state, setup string }
	variants, byVariant := order.Group(cells, func(c Cell) variant { return variant{c.DNSMode, c.StubState, c.Setup} })
	for _, v := range variants {
		tag, title := v.mode+"-"+v.state, fmt.Sprintf("DNS %s, stub %s", v.mode, v.state)
		if v.setup != "" {
			tag, title = tag+"-"+v.setup, title+", "+v.setup
		}
		vf := newVariantFigures(set, byVariant[v], tag, title)
		if err := vf.fig8(); err != nil {
			return err
		}
		// Fig. 9 and 10-11: each load's PLT relative to the baseline's
		// median, and the PLT itself.
		if err := vf.grid("fig9-"+vf.tag, "Fig. 9: each load's PLT relative to DoUDP + H3 1-RTT's median", "PLT increase over the baseline's median (%)", true,
			func(c *Cell) []float64 { return c.RelPLTs }, false); err != nil {
			return err
		}
		if err := vf.grid("fig10-"+vf.tag, "Fig. 10-11: page load time", "PLT (ms)", false,
			func(c *Cell) []float64 { return c.PLTs }, true); err != nil {
			return err
		}
		if err := vf.fig12(); err != nil {
			return err
		}
	}
	return nil
}

// variantFigures draws one variant's figures: its cells, with the
// profiles, pages and combinations they hold in first-seen order.
type variantFigures struct {
	set      *figure.Set
	cs       []Cell
	tag      string // in the figures' names
	about    string // in their headings
	profiles []string
	pages    []string
	combos   []combo
	others   []combo // every combination but the baseline
}

func newVariantFigures(set *figure.Set, cs []Cell, tag, about string) *variantFigures {
	vf := &variantFigures{set: set, cs: cs, tag: tag, about: about}
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen["p"+c.Profile] {
			seen["p"+c.Profile] = true
			vf.profiles = append(vf.profiles, c.Profile)
		}
		if !seen["g"+c.Page] {
			seen["g"+c.Page] = true
			vf.pages = append(vf.pages, c.Page)
		}
		if k := "c" + c.Transport + c.H3; !seen[k] {
			seen[k] = true
			vf.combos = append(vf.combos, combo{c.Transport, c.H3})
		}
	}
	for _, cb := range vf.combos {
		if cb.transport != "udp" || cb.h3 != "1rtt" {
			vf.others = append(vf.others, cb)
		}
	}
	return vf
}

// cell is the cell of a profile, page and combination, or nil.
func (vf *variantFigures) cell(profile, page string, cb combo) *Cell {
	for i := range vf.cs {
		c := &vf.cs[i]
		if c.Profile == profile && c.Page == page && c.Transport == cb.transport && c.H3 == cb.h3 {
			return c
		}
	}
	return nil
}

// rel is a combination's median PLT increase per (profile, page), NaN
// where it has no loads.
func (vf *variantFigures) rel(cb combo) func(p, g string) float64 {
	return func(p, g string) float64 {
		if c := vf.cell(p, g, cb); c != nil && c.OK > 0 && len(c.RelPLTs) > 0 {
			return c.RelPLT
		}
		return math.NaN()
	}
}

// fig8 draws Fig. 8: one heat map per combination, profile × page, side
// by side, on one colour scale; with one profile and one page, a bar per
// combination instead of heat maps of one cell each.
func (vf *variantFigures) fig8() error {
	if len(vf.others) == 0 {
		return nil
	}
	const heading = "Fig. 8: median PLT increase over DoUDP + H3 1-RTT (%)"
	if len(vf.profiles)*len(vf.pages) == 1 {
		var bars []figure.Bar
		for _, cb := range vf.others {
			bars = append(bars, figure.Bar{Label: cb.String(), Value: vf.rel(cb)(vf.profiles[0], vf.pages[0]), Color: figure.Colors[cb.transport]})
		}
		p, w, h, d, err := figure.Bars(bars, vf.pages[0]+", "+vf.profiles[0], "median PLT increase over DoUDP + H3 1-RTT (%)")
		if err != nil {
			return err
		}
		return vf.set.Add(p, "fig8-"+vf.tag, heading, vf.about, w, h, d)
	}
	var heats []*plot.Plot
	heatData := figure.Data{Header: []string{"combination", "profile", "page", "median PLT increase (%)"}}
	var hw, hh vg.Length
	scale := 1.0
	for _, cb := range vf.others {
		scale = max(scale, figure.Extent(vf.profiles, vf.pages, vf.rel(cb)))
	}
	for _, cb := range vf.others {
		p, w, h, d, err := figure.HeatMap(vf.profiles, vf.pages, vf.rel(cb), scale, cb.String(), "access profile", "page")
		if err != nil {
			return err
		}
		for _, row := range d.Rows {
			heatData.Rows = append(heatData.Rows, append([]string{cb.String()}, row...))
		}
		heats = append(heats, p)
		hw, hh = max(hw, w), max(hh, h)
	}
	rows := figure.Rows(heats, 3)
	hw, hh = hw*vg.Length(len(rows[0])), hh*vg.Length(len(rows))
	return vf.set.AddGrid(rows, "fig8-"+vf.tag, heading, vf.about, hw, hh, heatData)
}

// grid draws a grid of CDFs, profile (rows) × page (columns), on one x
// axis, of each cell's values per combination, the baseline's too if
// withBaseline; the legend gets a column of its own beside the first row.
func (vf *variantFigures) grid(name, heading, xlabel string, signed bool, values func(*Cell) []float64, withBaseline bool) error {
	data := figure.Data{Header: []string{"profile", "page", "series", "value", "cdf"}}
	panels := make([][]*plot.Plot, len(vf.profiles))
	lo, hi := math.Inf(1), math.Inf(-1)
	for j, p := range vf.profiles {
		for _, g := range vf.pages {
			var ss []*figure.Series
			for _, cb := range vf.combos {
				if !withBaseline && cb.transport == "udp" && cb.h3 == "1rtt" {
					continue
				}
				if c := vf.cell(p, g, cb); c != nil && len(values(c)) > 0 {
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
	for j := range panels {
		var extra *plot.Plot
		if j == 0 {
			extra = figure.LegendPanel(panels[0][0])
		}
		panels[j] = append(panels[j], extra)
	}
	return vf.set.AddGrid(panels, name, heading, vf.about, vg.Length(3.4*float64(len(vf.pages)+1))*vg.Inch, vg.Length(2.6*float64(len(vf.profiles)))*vg.Inch, data)
}

// fig12 draws Fig. 12: the median relative increase of every (page,
// profile) tuple, one CDF per combination.
func (vf *variantFigures) fig12() error {
	var tuples []*figure.Series
	for _, cb := range vf.others {
		var vals []float64
		for _, c := range vf.cs {
			if c.Transport == cb.transport && c.H3 == cb.h3 && len(c.RelPLTs) > 0 {
				vals = append(vals, c.RelPLT)
			}
		}
		tuples = append(tuples, cb.series(vals))
	}
	return addCDF(vf.set, tuples, "fig12-"+vf.tag, fmt.Sprintf("median PLT increase per (page, profile) over DoUDP + H3 1-RTT (%s)", vf.about),
		"median PLT increase (%)", true, "Fig. 12: median relative PLT over all tuples", vf.about)
}

// addCDF draws a CDF into set.
func addCDF(set *figure.Set, ss []*figure.Series, name, title, xlabel string, signed bool, heading, of string) error {
	p, d, err := figure.CDF(ss, title, xlabel, signed)
	if err != nil {
		return err
	}
	return set.Add(p, name, heading, of, figure.CDFWidth, figure.CDFHeight, d)
}

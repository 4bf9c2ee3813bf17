package report

import (
	"fmt"
	"html/template"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/web"
)

// The web experiment's figures (cross-layer paper Fig. 8-12, IMC 2022
// slides): page load times relative to the DoUDP + H3 1-RTT baseline.

// combo is a DNS transport with an HTTP/3 handshake, e.g. "doq + H3 0-RTT".
type combo struct{ transport, h3 string }

func (c combo) String() string {
	p, _ := protocol.Lookup(c.transport)
	name := p.Label
	if name == "" {
		name = c.transport
	}
	return name + " + H3 " + map[string]string{"0rtt": "0-RTT", "1rtt": "1-RTT"}[c.h3]
}

func (c combo) series(values []float64) *series {
	s := &series{label: c.String(), color: palette[c.transport], values: values}
	if c.h3 == "0rtt" {
		s.dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	}
	return s
}

// webFigures draws the web figures for each variant (DNS mode × stub
// state) of the loads.
func webFigures(loads []*web.Sample, dir string) ([]figure, []web.Cell, error) {
	cells := web.Summarize(loads)
	type variant struct{ mode, state string }
	variants, byVariant := order.Group(cells, func(c web.Cell) variant { return variant{c.DNSMode, c.StubState} })
	var figs []figure
	add := func(name, metric, profile string, svg []byte) {
		figs = append(figs, figure{Name: name, Metric: metric, Profile: profile, SVG: template.HTML(svg)})
	}
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
		cell := func(profile, page string, cb combo) *web.Cell {
			for i := range cs {
				c := &cs[i]
				if c.Profile == profile && c.Page == page && c.Transport == cb.transport && c.H3 == cb.h3 {
					return c
				}
			}
			return nil
		}
		about := fmt.Sprintf("DNS %s, stub %s", v.mode, v.state)
		// Fig. 8: a heat map per combination, page × profile.
		for _, cb := range combos {
			if cb.transport == "udp" && cb.h3 == "1rtt" {
				continue
			}
			name := fmt.Sprintf("heat-%s-%s-%s", tag, cb.transport, cb.h3)
			svg, err := heatMap(profiles, pages, func(p, g string) float64 {
				if c := cell(p, g, cb); c != nil && c.OK > 0 && len(c.RelPLTs) > 0 {
					return c.RelPLT
				}
				return math.NaN()
			}, cb.String()+": median PLT increase (%)", filepath.Join(dir, name))
			if err != nil {
				return nil, nil, err
			}
			add(name, "Fig. 8: median PLT increase over DoUDP + H3 1-RTT, "+cb.String(), about, svg)
		}
		// Fig. 9-11: per page and profile, the CDF of each load's PLT
		// relative to the baseline's median, and of the PLT itself.
		for _, g := range pages {
			for _, p := range profiles {
				var rel, abs []*series
				for _, cb := range combos {
					if c := cell(p, g, cb); c != nil {
						if len(c.RelPLTs) > 0 {
							rel = append(rel, cb.series(append([]float64(nil), c.RelPLTs...)))
						}
						abs = append(abs, cb.series(append([]float64(nil), c.PLTs...)))
					}
				}
				name := fmt.Sprintf("cdf-relplt-%s-%s-%s", tag, g, p)
				svg, err := cdf(rel, fmt.Sprintf("PLT relative to DoUDP + H3 1-RTT — %s, %s (%s)", g, p, about), "PLT increase over the baseline's median (%)", filepath.Join(dir, name), true)
				if err != nil {
					return nil, nil, err
				}
				add(name, "Fig. 9: relative PLT, "+g, p+", "+about, svg)
				name = fmt.Sprintf("cdf-plt-%s-%s-%s", tag, g, p)
				if svg, err = cdf(abs, fmt.Sprintf("page load time — %s, %s (%s)", g, p, about), "PLT (ms)", filepath.Join(dir, name), false); err != nil {
					return nil, nil, err
				}
				add(name, "Fig. 10-11: PLT, "+g, p+", "+about, svg)
			}
		}
		// Fig. 12: the median relative increase of every (page, profile)
		// tuple, one CDF per combination.
		var tuples []*series
		for _, cb := range combos {
			if cb.transport == "udp" && cb.h3 == "1rtt" {
				continue
			}
			var vals []float64
			for _, c := range cs {
				if c.Transport == cb.transport && c.H3 == cb.h3 && len(c.RelPLTs) > 0 {
					vals = append(vals, c.RelPLT)
				}
			}
			tuples = append(tuples, cb.series(vals))
		}
		name := "cdf-medrel-" + tag
		svg, err := cdf(tuples, fmt.Sprintf("median PLT increase per (page, profile) over DoUDP + H3 1-RTT (%s)", about), "median PLT increase (%)", filepath.Join(dir, name), true)
		if err != nil {
			return nil, nil, err
		}
		add(name, "Fig. 12: median relative PLT over all tuples", about, svg)
	}
	return figs, cells, nil
}

// grid is a heat map's values: columns are profiles, rows pages.
type grid struct {
	cols, rows []string
	z          func(col, row string) float64
}

func (g grid) Dims() (int, int)   { return len(g.cols), len(g.rows) }
func (g grid) Z(c, r int) float64 { return g.z(g.cols[c], g.rows[r]) }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }
func (g grid) Min() float64       { return g.bound(math.Min, 0) }
func (g grid) Max() float64       { return g.bound(math.Max, 1) }
func (g grid) bound(f func(a, b float64) float64, def float64) float64 {
	v, ok := 0.0, false
	for _, c := range g.cols {
		for _, r := range g.rows {
			if z := g.z(c, r); !math.IsNaN(z) {
				if !ok {
					v, ok = z, true
				}
				v = f(v, z)
			}
		}
	}
	if !ok {
		return def
	}
	return v
}

// heatMap draws values per profile (x) and page (y), each cell labelled.
func heatMap(profiles, pages []string, z func(profile, page string) float64, title, base string) ([]byte, error) {
	g := grid{cols: profiles, rows: pages, z: z}
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(9)
	lo, hi := g.Min(), g.Max()
	// Zero is white: blue is faster than the baseline, red slower.
	m := max(math.Abs(lo), math.Abs(hi), 1)
	pal := moreland.SmoothBlueRed()
	pal.SetMin(-m)
	pal.SetMax(m)
	h := plotter.NewHeatMap(g, pal.Palette(64))
	h.Min, h.Max = -m, m
	h.NaN = plotter.DefaultGridLineStyle.Color
	p.Add(h)
	var labels plotter.XYLabels
	for c, prof := range profiles {
		for r, page := range pages {
			v := z(prof, page)
			text := "–"
			if !math.IsNaN(v) {
				text = fmt.Sprintf("%+.1f%%", v)
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(c), Y: float64(r)})
			labels.Labels = append(labels.Labels, text)
		}
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = -0.5, -0.5
		l.TextStyle[i].Font.Size = vg.Points(10)
	}
	p.Add(l)
	ticks := func(names []string) plot.ConstantTicks {
		t := make(plot.ConstantTicks, len(names))
		for i, n := range names {
			t[i] = plot.Tick{Value: float64(i), Label: n}
		}
		return t
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = ticks(profiles), ticks(pages)
	p.X.Label.Text, p.Y.Label.Text = "access profile", "page"
	p.X.Min, p.X.Max = -0.5, float64(len(profiles))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(pages))-0.5
	return save(p, base, vg.Length(1.4*float64(len(profiles))+1.5)*vg.Inch, vg.Length(0.8*float64(len(pages))+1.4)*vg.Inch)
}

// pct formats a relative change for the tables.
func pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strings.Replace(fmt.Sprintf("%+.1f%%", v), "+0.0%", "0.0%", 1)
}

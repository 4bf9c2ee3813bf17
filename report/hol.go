package report

import (
	"fmt"
	"html/template"
	"image/color"
	"path/filepath"
	"slices"

	"github.com/doxlab/doxlab/experiment/amplification"
	"github.com/doxlab/doxlab/experiment/hol"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/doxlab/doxlab/internal/order"
)

// holFigures draws the DoH-cost paper's Fig. 2 per profile and transport:
// each query's resolution time against its send time, in the run with
// delayed answers, the delayed queries themselves marked.
func holFigures(qs []*hol.Query, dir string) ([]figure, error) {
	type key struct{ p, t string }
	delayed := slices.DeleteFunc(slices.Clone(qs), func(q *hol.Query) bool { return q.Run != "delayed" || q.Status != "ok" })
	keys, groups := order.Group(delayed, func(q *hol.Query) key { return key{q.Profile, q.Transport} })
	var figs []figure
	for _, k := range keys {
		var own, others plotter.XYs
		for _, q := range groups[k] {
			pt := plotter.XY{X: q.SendMs / 1000, Y: q.ResolveMs}
			if q.Delayed {
				own = append(own, pt)
			} else {
				others = append(others, pt)
			}
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("head-of-line blocking: %s, profile %s", k.t, k.p)
		p.X.Label.Text = "query sent (s)"
		p.Y.Label.Text = "resolution time (ms)"
		p.Add(plotter.NewGrid())
		for _, s := range []struct {
			pts   plotter.XYs
			label string
			c     color.Color
			shape draw.GlyphDrawer
		}{
			{others, "not delayed itself", color.RGBA{0x1f, 0x77, 0xb4, 0xff}, draw.CircleGlyph{}},
			{own, "delayed by the server", color.RGBA{0xd6, 0x27, 0x28, 0xff}, draw.CrossGlyph{}},
		} {
			if len(s.pts) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(s.pts)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = s.c, s.shape, vg.Points(2.5)
			p.Add(sc)
			p.Legend.Add(s.label, sc)
		}
		p.Legend.Top = true
		p.Y.Min = 0
		name := fmt.Sprintf("hol-%s-%s", k.p, k.t)
		svg, err := save(p, filepath.Join(dir, name), 7*vg.Inch, 3*vg.Inch)
		if err != nil {
			return nil, err
		}
		figs = append(figs, figure{Name: name, Metric: "Fig. 2: head-of-line blocking, " + k.t, Profile: k.p, SVG: template.HTML(svg)})
	}
	return figs, nil
}

// ampFigure draws the amplification experiment's median handshake in RTTs
// per certificate × key share × validation, stalled cells in red.
func ampFigure(cells []amplification.Cell, dir string) (figure, error) {
	p := plot.New()
	p.Title.Text = "DoQ handshake per certificate, key share and address validation"
	p.Y.Label.Text = "median handshake (RTTs)"
	p.Add(plotter.NewGrid())
	var names []string
	for i, c := range cells {
		bar, err := plotter.NewBarChart(plotter.Values{c.HandshakeRTTs}, vg.Points(18))
		if err != nil {
			return figure{}, err
		}
		bar.XMin = float64(i)
		bar.Color = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
		if c.Stalled > 0.5 {
			bar.Color = color.RGBA{0xd6, 0x27, 0x28, 0xff}
		}
		bar.LineStyle.Width = 0
		p.Add(bar)
		names = append(names, fmt.Sprintf("%s\n%s\n%s", c.Cert, c.KeyShare, c.Validation))
	}
	p.NominalX(names...)
	p.Y.Min = 0
	name := "amplification"
	svg, err := save(p, filepath.Join(dir, name), vg.Length(0.6*float64(len(cells))+1.5)*vg.Inch, 4*vg.Inch)
	if err != nil {
		return figure{}, err
	}
	return figure{Name: name, Metric: "amplification limit: handshake in RTTs (red: the server stalled for an ACK)", Profile: "", SVG: template.HTML(svg)}, nil
}

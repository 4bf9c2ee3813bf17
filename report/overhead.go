package report

import (
	"fmt"
	"html/template"
	"image/color"
	"path/filepath"

	xoverhead "github.com/doxlab/doxlab/experiment/overhead"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/overhead"
)

var layerColors = [overhead.NumLayers]color.Color{
	color.RGBA{0xbd, 0xbd, 0xbd, 0xff}, color.RGBA{0x96, 0x96, 0x96, 0xff}, color.RGBA{0x9e, 0xca, 0xe1, 0xff},
	color.RGBA{0x42, 0x92, 0xc6, 0xff}, color.RGBA{0x08, 0x45, 0x94, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	color.RGBA{0xfd, 0xae, 0x6b, 0xff}, color.RGBA{0xe6, 0x55, 0x0d, 0xff}, color.RGBA{0x31, 0xa3, 0x54, 0xff},
	color.RGBA{0x00, 0x00, 0x00, 0xff},
}

// overheadFigures draws, per certificate and connection mode, the octets
// per resolution by transport stacked by layer (the DoH-cost paper's
// Fig. 3 and 5) and the packets per resolution (Fig. 4).
func overheadFigures(cells []xoverhead.Cell, dir string) ([]figure, error) {
	type group struct{ cert, mode string }
	groups, by := order.Group(cells, func(c xoverhead.Cell) group { return group{c.Cert, c.Mode} })
	var figs []figure
	for _, g := range groups {
		cs := by[g]
		var names []string
		for _, c := range cs {
			names = append(names, c.Transport)
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("octets per resolution by layer: %s connection, %s certificate", g.mode, g.cert)
		p.Y.Label.Text = "octets per resolution (both directions)"
		p.Add(plotter.NewGrid())
		var below *plotter.BarChart
		for l := overhead.Layer(0); l < overhead.NumLayers; l++ {
			vals := make(plotter.Values, len(cs))
			any := false
			for i, c := range cs {
				vals[i] = c.Layers[l]
				any = any || vals[i] > 0
			}
			if !any {
				continue
			}
			bar, err := plotter.NewBarChart(vals, vg.Points(22))
			if err != nil {
				return nil, err
			}
			bar.Color, bar.LineStyle.Width = layerColors[l], 0
			if below != nil {
				bar.StackOn(below)
			}
			below = bar
			p.Add(bar)
			p.Legend.Add(overhead.LayerNames[l], bar)
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.NominalX(names...)
		name := fmt.Sprintf("overhead-layers-%s-%s", g.cert, g.mode)
		svg, err := save(p, filepath.Join(dir, name), 7*vg.Inch, 4.5*vg.Inch)
		if err != nil {
			return nil, err
		}
		figs = append(figs, figure{Name: name, Metric: "Fig. 3 and 5: octets per resolution by layer, " + g.mode + " connection", Profile: g.cert + " certificate", SVG: template.HTML(svg)})

		pk := plot.New()
		pk.Title.Text = fmt.Sprintf("packets per resolution: %s connection, %s certificate", g.mode, g.cert)
		pk.Y.Label.Text = "packets per resolution (both directions)"
		pk.Add(plotter.NewGrid())
		vals := make(plotter.Values, len(cs))
		for i, c := range cs {
			vals[i] = c.Packets
		}
		bar, err := plotter.NewBarChart(vals, vg.Points(22))
		if err != nil {
			return nil, err
		}
		bar.Color, bar.LineStyle.Width = color.RGBA{0x1f, 0x77, 0xb4, 0xff}, 0
		pk.Add(bar)
		pk.NominalX(names...)
		name = fmt.Sprintf("overhead-packets-%s-%s", g.cert, g.mode)
		if svg, err = save(pk, filepath.Join(dir, name), 6*vg.Inch, 3.5*vg.Inch); err != nil {
			return nil, err
		}
		figs = append(figs, figure{Name: name, Metric: "Fig. 4: packets per resolution, " + g.mode + " connection", Profile: g.cert + " certificate", SVG: template.HTML(svg)})
	}
	return figs, nil
}

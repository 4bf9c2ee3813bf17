package figure

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Timeline is one panel's series over time.
type Timeline struct {
	Label string
	X, Y  []float64 // seconds, and the value at each
}

// Timelines is a figure of one timeline per panel, three panels to a
// row, on one logarithmic y scale shared by all (RTT under load, say).
type Timelines struct {
	Name, Title    string
	XLabel, YLabel string
	Columns        [3]string // of its CSV: the panel, x and y
	Panels         []Timeline
}

// AddTimelines draws f into s.
func (s *Set) AddTimelines(f Timelines) error {
	data := Data{Header: f.Columns[:]}
	var panels []*plot.Plot
	hi := 0.0
	for _, tl := range f.Panels {
		pts := make(plotter.XYs, len(tl.X))
		for i := range tl.X {
			pts[i] = plotter.XY{X: tl.X[i], Y: tl.Y[i]}
			data.Add(tl.Label, tl.X[i], tl.Y[i])
			hi = max(hi, tl.Y[i])
		}
		p := plot.New()
		p.Title.Text = tl.Label
		p.X.Label.Text, p.Y.Label.Text = f.XLabel, f.YLabel
		p.Add(plotter.NewGrid())
		LogY(p)
		if len(pts) > 0 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.Color = Blue
			p.Add(newEdgeLine(l))
		}
		panels = append(panels, p)
	}
	for _, p := range panels {
		p.Y.Min, p.Y.Max = 1, hi*1.2
	}
	grid := Rows(panels, 3)
	return s.AddGrid(grid, f.Name, f.Title, "", 10*vg.Inch, vg.Length(2.6*float64(len(grid)))*vg.Inch, data)
}

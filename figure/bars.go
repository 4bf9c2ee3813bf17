package figure

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Bar is one bar of Bars: a label, its value and its colour.
type Bar struct {
	Label string
	Value float64 // NaN: no data, drawn as an empty row
	Color color.Color
	Text  string // written beside the bar; "" for the value as a relative change, "+12.3%"
}

// Bars draws a horizontal bar per value, each labelled with it, on a
// shared zero: what a heat map of a single cell per panel becomes (one
// profile and one page), a relative change in percent per combination,
// or any quantity per category whose names would not fit side by side.
// It returns the size to save it in.
func Bars(bars []Bar, title, xlabel string) (*plot.Plot, vg.Length, vg.Length, Data, error) {
	data := Data{Header: []string{"series", "value"}}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Add(plotter.NewGrid())
	var names []string
	lo, hi := 0.0, 0.0
	var labels plotter.XYLabels
	for i, b := range bars {
		names = append(names, b.Label)
		data.Add(b.Label, b.Value)
		if math.IsNaN(b.Value) {
			continue
		}
		lo, hi = min(lo, b.Value), max(hi, b.Value)
		c, err := plotter.NewBarChart(plotter.Values{b.Value}, vg.Points(12))
		if err != nil {
			return nil, 0, 0, data, err
		}
		c.Horizontal, c.XMin = true, float64(i)
		c.Color, c.LineStyle.Width = b.Color, 0
		if c.Color == nil {
			c.Color = color.Gray{0x66}
		}
		p.Add(c)
		labels.XYs = append(labels.XYs, plotter.XY{X: b.Value, Y: float64(i)})
		text := b.Text
		if text == "" {
			text = fmt.Sprintf("%+.1f%%", b.Value)
		}
		labels.Labels = append(labels.Labels, " "+text+" ")
	}
	if len(labels.XYs) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, 0, 0, data, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].YAlign = -0.5
			if labels.XYs[i].X < 0 {
				l.TextStyle[i].XAlign = -1 // beside the bar's end, outside it
			}
			l.TextStyle[i].Font.Size = valueSize
		}
		p.Add(l)
	}
	p.NominalY(names...)
	span := max(hi-lo, 1)
	p.X.Min, p.X.Max = lo-0.25*span, hi+0.25*span // room for the values' labels
	if lo == 0 {
		p.X.Min = 0 // nothing below zero to label
	}
	h := vg.Length(0.9+0.28*float64(len(bars))) * vg.Inch
	fixedRows.Store(p, true) // a bar a row, at any width
	return p, 7 * vg.Inch, h, data, nil
}

// Package figure draws the report's figures with gonum/plot, each saved
// as PNG and SVG and inlined in the HTML page, and holds what every
// experiment's section of the report shares: the transports' colours,
// CDFs, heat maps and the formats of table cells.
package figure

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Figure is one figure: Dir/Name.png and Dir/Name.svg, and the SVG to
// inline in the page.
type Figure struct {
	Name    string // file name without extension, and the page's anchor
	Heading string // what it shows: "Fig. 2: head-of-line blocking, doq"
	Of      string // of what: a profile, a variant; may be empty
	SVG     template.HTML
	CSV     string // the figure's data beside it (Name.csv), relative to the page
}

// Set collects the figures drawn into one directory.
type Set struct {
	Dir     string
	Figures []Figure
}

// Add saves p as name.png and name.svg in the set's directory, w × h.
func (s *Set) Add(p *plot.Plot, name, heading, of string, w, h vg.Length) error {
	base := filepath.Join(s.Dir, name)
	for _, ext := range []string{".png", ".svg"} {
		if err := p.Save(w, h, base+ext); err != nil {
			return fmt.Errorf("saving %s: %w", base+ext, err)
		}
	}
	svg, err := os.ReadFile(base + ".svg")
	if err != nil {
		return err
	}
	// Inline SVG: drop the XML prolog.
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		svg = svg[i:]
	}
	s.Figures = append(s.Figures, Figure{Name: name, Heading: heading, Of: of, SVG: template.HTML(svg)})
	return nil
}

// Files lists the PNG and SVG files of the set's figures.
func (s *Set) Files() []string {
	var out []string
	for _, f := range s.Figures {
		out = append(out, filepath.Join(s.Dir, f.Name+".png"), filepath.Join(s.Dir, f.Name+".svg"))
	}
	return out
}

// Colors are the transports' colours, the same in every figure.
var Colors = map[string]color.Color{
	"udp": color.RGBA{0x4d, 0x4d, 0x4d, 0xff}, "tcp": color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, "dot": color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	"doh1": color.RGBA{0xe3, 0x77, 0xc2, 0xff}, "doh2": color.RGBA{0xd6, 0x27, 0x28, 0xff}, "doh3": color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	"doq": color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// Blue and Red are the two colours of figures that compare two things.
var (
	Blue = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	Red  = color.RGBA{0xd6, 0x27, 0x28, 0xff}
)

// Series is one line of a CDF.
type Series struct {
	Label  string
	Color  color.Color // nil: black
	Dashes []vg.Length // nil: solid
	Values []float64   // sorted in place when drawn
}

// CDFWidth and CDFHeight are the size CDFs are saved in.
const CDFWidth, CDFHeight = 7 * vg.Inch, 4.5 * vg.Inch

// CDF plots the empirical CDF of each series. signed lets the x axis go
// below zero (relative changes).
func CDF(ss []*Series, title, xlabel string, signed bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "CDF"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(8)
	lo, hi := math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range ss {
		if len(s.Values) == 0 {
			continue
		}
		n++
		slices.Sort(s.Values)
		lo, hi = min(lo, s.Values[0]), max(hi, s.Values[len(s.Values)-1])
		pts := make(plotter.XYs, 0, 2*len(s.Values))
		for i, v := range s.Values {
			pts = append(pts, plotter.XY{X: v, Y: float64(i) / float64(len(s.Values))}, plotter.XY{X: v, Y: float64(i+1) / float64(len(s.Values))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = s.Color
		if l.Color == nil {
			l.Color = color.Black
		}
		l.Width = vg.Points(1.5)
		l.Dashes = s.Dashes
		p.Add(l)
		p.Legend.Add(s.Label, l)
	}
	if n == 0 {
		p.Title.Text += " (no data)"
	} else {
		// Room on the right for the legend, so it never covers a line.
		span := max(hi-lo, 0.5)
		p.X.Min, p.X.Max = lo-0.05*span, hi+0.45*span
		if !signed {
			p.X.Min = max(0, p.X.Min)
		}
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
}

// grid is a heat map's values.
type grid struct {
	cols, rows []string
	z          func(col, row string) float64
}

func (g grid) Dims() (int, int)   { return len(g.cols), len(g.rows) }
func (g grid) Z(c, r int) float64 { return g.z(g.cols[c], g.rows[r]) }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// extent is the smallest and largest value that is not NaN; 0, 1 if none.
func (g grid) extent() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, c := range g.cols {
		for _, r := range g.rows {
			if z := g.z(c, r); !math.IsNaN(z) {
				lo, hi = min(lo, z), max(hi, z)
			}
		}
	}
	if lo > hi {
		return 0, 1
	}
	return lo, hi
}

// HeatMap plots z, a relative change in percent, per column (x) and row
// (y), each cell labelled; zero is white, blue faster, red slower. It
// returns the size to save it in.
func HeatMap(cols, rows []string, z func(col, row string) float64, title, xlabel, ylabel string) (*plot.Plot, vg.Length, vg.Length, error) {
	g := grid{cols: cols, rows: rows, z: z}
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(9)
	lo, hi := g.extent()
	m := max(math.Abs(lo), math.Abs(hi), 1)
	pal := moreland.SmoothBlueRed()
	pal.SetMin(-m)
	pal.SetMax(m)
	h := plotter.NewHeatMap(g, pal.Palette(64))
	h.Min, h.Max = -m, m
	h.NaN = plotter.DefaultGridLineStyle.Color
	p.Add(h)
	var labels plotter.XYLabels
	for c, col := range cols {
		for r, row := range rows {
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(c), Y: float64(r)})
			text := "–"
			if v := z(col, row); !math.IsNaN(v) {
				text = fmt.Sprintf("%+.1f%%", v)
			}
			labels.Labels = append(labels.Labels, text)
		}
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, 0, 0, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = -0.5, -0.5
		l.TextStyle[i].Font.Size = vg.Points(10)
	}
	p.Add(l)
	p.X.Tick.Marker, p.Y.Tick.Marker = Names(cols), Names(rows)
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Min, p.X.Max = -0.5, float64(len(cols))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	return p, vg.Length(1.4*float64(len(cols))+1.5) * vg.Inch, vg.Length(0.8*float64(len(rows))+1.4) * vg.Inch, nil
}

// Names are ticks at 0, 1, 2… labelled with names.
func Names(names []string) plot.ConstantTicks {
	t := make(plot.ConstantTicks, len(names))
	for i, n := range names {
		t[i] = plot.Tick{Value: float64(i), Label: n}
	}
	return t
}

// Pct formats a relative change in percent; "–" for NaN.
func Pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strings.Replace(fmt.Sprintf("%+.1f%%", v), "+0.0%", "0.0%", 1)
}

// Funcs are the formats the report's tables share: f (two decimals, "–"
// for NaN), ms (one decimal), pct (a relative change), share (a fraction
// as a percentage).
var Funcs = template.FuncMap{
	"f": func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.2f", v)
	},
	"ms":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pct":   Pct,
	"share": func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
}

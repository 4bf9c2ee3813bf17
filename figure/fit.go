package figure

import (
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// margin is left blank around a whole figure: a browser's text box
// reaches past the ink gonum measures, and a label drawn on the edge
// would be cut.
const margin = 4 * vg.Millimeter / 2

// yAxisRoom is what a panel's y axis (its label and tick labels) takes
// of its width, and the x axis of its height, roughly: the rest is
// where the other axis's label must fit.
const yAxisRoom = 0.45 * vg.Inch

// fitting is a panel's words being fit to the room it has at one size:
// the title and the axis labels wrapped at spaces onto lines that fit,
// and tick labels thinned so that neighbours never touch. undo restores
// them for the next size.
type fitting struct {
	p                *plot.Plot
	title, xl, yl    string
	xmarker, ymarker plot.Ticker
}

// wrapWords wraps p's title and axis labels to c, the panel's canvas.
func wrapWords(p *plot.Plot, c draw.Canvas) *fitting {
	f := &fitting{p: p, title: p.Title.Text, xl: p.X.Label.Text, yl: p.Y.Label.Text, xmarker: p.X.Tick.Marker, ymarker: p.Y.Tick.Marker}
	w, h := c.Max.X-c.Min.X, c.Max.Y-c.Min.Y
	p.Title.Text = wrap(f.title, p.Title.TextStyle, w)
	p.X.Label.Text = wrap(f.xl, p.X.Label.TextStyle, w-yAxisRoom)
	p.Y.Label.Text = wrap(f.yl, p.Y.Label.TextStyle, h-yAxisRoom)
	return f
}

// thin thins p's tick labels to the data area it has on c. Named ticks
// (categories) are never thinned: a category must keep its name.
func (f *fitting) thin(c draw.Canvas) {
	p := f.p
	da := p.DataCanvas(c)
	w, h := da.Max.X-da.Min.X, da.Max.Y-da.Min.Y
	// gonum's default ticks ignore the axis's length: a label about every
	// half inch (quarter inch upright) instead, at least three, thinned
	// below where they would touch.
	xm, ym := f.xmarker, f.ymarker
	if isDefault(xm) {
		xm = niceTicks{n: max(3, int(w/(vg.Inch/2)))}
	}
	if isDefault(ym) {
		ym = niceTicks{n: max(3, int(h/(vg.Inch/4)))}
	}
	if _, named := xm.(plot.ConstantTicks); !named && xm != nil {
		p.X.Tick.Marker = thinTicks{inner: xm, scale: p.X.Scale, style: p.X.Tick.Label, room: w}
	}
	if _, named := ym.(plot.ConstantTicks); !named && ym != nil {
		p.Y.Tick.Marker = thinTicks{inner: ym, scale: p.Y.Scale, style: p.Y.Tick.Label, room: h, upright: true}
	}
}

// isDefault says whether m is gonum's default ticker, or ours that only
// reformats its labels.
func isDefault(m plot.Ticker) bool {
	switch m.(type) {
	case plot.DefaultTicks, PlainTicks:
		return true
	}
	return false
}

func (f *fitting) undo() {
	f.p.Title.Text, f.p.X.Label.Text, f.p.Y.Label.Text = f.title, f.xl, f.yl
	f.p.X.Tick.Marker, f.p.Y.Tick.Marker = f.xmarker, f.ymarker
}

// wrap breaks s at spaces into lines no wider than width, as drawn in
// style; a word wider than width stays whole on its line.
func wrap(s string, style text.Style, width vg.Length) string {
	if s == "" || style.Width(s) <= width {
		return s
	}
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && style.Width(line+" "+word) > width {
			lines = append(lines, line)
			line = word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}

// thinTicks are inner's ticks with labels removed where one would come
// within 4 pt of another: gonum chooses ticks without knowing the axis's
// length, and in a narrow panel "1.25" lands on "1.50". Powers of ten are
// placed first, so a log axis keeps every decade it can; then the rest,
// in order. A tick whose label goes stays, unlabelled.
type thinTicks struct {
	inner   plot.Ticker
	scale   plot.Normalizer
	style   text.Style
	room    vg.Length
	upright bool // a y axis: labels stack, their height is what counts
}

// Ticks implements plot.Ticker.
func (t thinTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := t.inner.Ticks(lo, hi)
	if hi <= lo {
		return ts
	}
	type span struct{ from, to vg.Length }
	var taken []span
	place := func(i int) {
		at := vg.Length(t.scale.Normalize(lo, hi, ts[i].Value)) * t.room
		half := t.style.Width(ts[i].Label) / 2
		if t.upright {
			half = t.style.Height(ts[i].Label) / 2
		}
		s := span{at - half - vg.Points(2), at + half + vg.Points(2)}
		for _, o := range taken {
			if s.from < o.to && o.from < s.to {
				ts[i].Label = ""
				return
			}
		}
		taken = append(taken, s)
	}
	for _, decades := range []bool{true, false} {
		for i, tk := range ts {
			if tk.Label != "" && decade(tk.Value) == decades {
				place(i)
			}
		}
	}
	return ts
}

// decade says whether v is a power of ten.
func decade(v float64) bool {
	if v <= 0 {
		return false
	}
	l := math.Log10(v)
	return math.Abs(l-math.Round(l)) < 1e-9
}

// edgeLine is a plotter.Line drawn for print. Its glyph boxes (which
// pad the data area by half the line's width) are those of its extreme
// points alone: a Line reports one per point, and gonum walks them on
// every layout pass. A dozen CDFs of 4,000 points a panel, drawn at two
// widths in three formats, spent two thirds of a report's time there;
// the padding is the same. And it is drawn through the vertices that
// change its path by more than thinTolerance where it is drawn (thin):
// a CDF's 4,000 vertices fall a few to the 300-dpi pixel, and stroking
// them all was most of what remained.
type edgeLine struct {
	*plotter.Line
	ext [4]int // the points of least and most x, least and most y
}

func newEdgeLine(l *plotter.Line) *edgeLine {
	e := &edgeLine{Line: l}
	xys := l.XYs
	for i, pt := range xys {
		if pt.X < xys[e.ext[0]].X {
			e.ext[0] = i
		}
		if pt.X > xys[e.ext[1]].X {
			e.ext[1] = i
		}
		if pt.Y < xys[e.ext[2]].Y {
			e.ext[2] = i
		}
		if pt.Y > xys[e.ext[3]].Y {
			e.ext[3] = i
		}
	}
	return e
}

func (l *edgeLine) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	if len(l.XYs) == 0 {
		return nil
	}
	r := 0.5 * l.LineStyle.Width
	rect := vg.Rectangle{Min: vg.Point{X: -r, Y: -r}, Max: vg.Point{X: r, Y: r}}
	out := make([]plot.GlyphBox, 0, len(l.ext))
	for _, i := range l.ext {
		out = append(out, plot.GlyphBox{X: p.X.Norm(l.XYs[i].X), Y: p.Y.Norm(l.XYs[i].Y), Rectangle: rect})
	}
	return out
}

// Plot strokes the line through its thinned vertices. A line filled
// below or drawn in steps (none of doxlab's) is drawn as gonum draws it.
func (l *edgeLine) Plot(c draw.Canvas, p *plot.Plot) {
	if l.FillColor != nil || l.StepStyle != plotter.NoStep || l.LineStyle.Width == 0 {
		l.Line.Plot(c, p)
		return
	}
	c.StrokeLines(l.LineStyle, c.ClipLinesXY(thin(canvasPoints(c, p, l.XYs), thinTolerance))...)
}

// thinPolygon is a plotter.Polygon of one ring filled through its
// thinned vertices: a CDF's confidence band has twice its line's.
type thinPolygon struct{ *plotter.Polygon }

func (pg thinPolygon) Plot(c draw.Canvas, p *plot.Plot) {
	if len(pg.XYs) != 1 || pg.Color == nil || pg.LineStyle.Width != 0 {
		pg.Polygon.Plot(c, p)
		return
	}
	ring := c.ClipPolygonXY(thin(canvasPoints(c, p, pg.XYs[0]), thinTolerance))
	if len(ring) == 0 {
		return
	}
	c.SetColor(pg.Color)
	var pa vg.Path
	pa.Move(ring[0])
	for _, pt := range ring[1:] {
		pa.Line(pt)
	}
	pa.Close()
	c.Fill(pa)
}

// canvasPoints are xys where p draws them on c.
func canvasPoints(c draw.Canvas, p *plot.Plot, xys plotter.XYs) []vg.Point {
	trX, trY := p.Transforms(&c)
	ps := make([]vg.Point, len(xys))
	for i, pt := range xys {
		ps[i] = vg.Point{X: trX(pt.X), Y: trY(pt.Y)}
	}
	return ps
}

// thinTolerance is how far a vertex left out may lie from the path
// drawn: a tenth of a point, under half a pixel at 300 dpi and a
// fifteenth of a line's width.
const thinTolerance = vg.Length(0.1)

// thin is ps less the vertices within tol of the path through the rest
// (Douglas-Peucker): the two first and the two last are kept, so that
// the line's ends are capped as before, and so is every vertex farther
// than tol from the segment between the two kept around it. ps is
// reused.
func thin(ps []vg.Point, tol vg.Length) []vg.Point {
	if len(ps) < 5 {
		return ps
	}
	last := len(ps) - 1
	keep := make([]bool, len(ps))
	keep[0], keep[1], keep[last-1], keep[last] = true, true, true, true
	type span struct{ a, b int }
	stack := []span{{1, last - 1}}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		far, at := tol, -1
		for i := s.a + 1; i < s.b; i++ {
			if d := segmentDistance(ps[i], ps[s.a], ps[s.b]); d > far {
				far, at = d, i
			}
		}
		if at >= 0 {
			keep[at] = true
			stack = append(stack, span{s.a, at}, span{at, s.b})
		}
	}
	out := ps[:0]
	for i, k := range keep {
		if k {
			out = append(out, ps[i])
		}
	}
	return out
}

// segmentDistance is how far p lies from the segment a-b.
func segmentDistance(p, a, b vg.Point) vg.Length {
	dx, dy := float64(b.X-a.X), float64(b.Y-a.Y)
	px, py := float64(p.X-a.X), float64(p.Y-a.Y)
	if l2 := dx*dx + dy*dy; l2 > 0 {
		t := max(0, min(1, (px*dx+py*dy)/l2))
		px, py = px-t*dx, py-t*dy
	}
	return vg.Length(math.Hypot(px, py))
}

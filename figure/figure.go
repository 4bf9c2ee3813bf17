// Package figure draws the report's figures with gonum/plot, each saved
// as SVG, PDF and 300-dpi PNG at a paper's one- and two-column widths and
// inlined in the HTML page, and holds what every
// experiment's section of the report shares: the transports' colours,
// CDFs, heat maps and the formats of table cells.
package figure

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"html/template"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/sheet"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/protocol"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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

// DrawTimeout bounds the drawing of one figure (all its files).
var DrawTimeout = 60 * time.Second

// Set collects the figures drawn into one directory.
type Set struct {
	Dir     string
	Figures []Figure
	// Parallel draws each figure in the background, as many at once as
	// there are cores, where a figure's six files are drawn one after
	// another: Figures and Files are whole after Wait (NewSection
	// waits). Its figures must share no plot.
	Parallel bool

	drawing sync.WaitGroup
	mu      sync.Mutex // Figures, as figures drawn in the background fill them in
	errs    []error
}

// drawSlots bounds the figures drawn at once by the parallel sets.
var drawSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// Wait waits for the figures drawn in the background, and says the first
// that failed.
func (s *Set) Wait() error {
	s.drawing.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Data is a figure's data as a table, written beside it as CSV so that
// every figure can be redrawn or checked elsewhere.
type Data struct {
	Header []string
	Rows   [][]string
}

// Add appends a row; values are formatted with %v, floats with %g.
func (d *Data) Add(values ...any) {
	row := make([]string, len(values))
	for i, v := range values {
		switch v := v.(type) {
		case float64:
			row[i] = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			row[i] = fmt.Sprint(v)
		}
	}
	d.Rows = append(d.Rows, row)
}

// Add saves p in the set's directory as name.svg, name.pdf and name.png
// two columns wide and as name-1col.* one column wide, and its data as
// name.csv. w × h is the shape it was designed in: it is drawn at print
// width, never taller than that shape at that width.
func (s *Set) Add(p *plot.Plot, name, heading, of string, w, h vg.Length, data Data) error {
	return s.AddGrid([][]*plot.Plot{{p}}, name, heading, of, w, h, data)
}

// AddGrid saves panels, rows of plots drawn as small multiples on one
// canvas with their data areas aligned (a nil panel is left blank), as
// Add does. Give the panels the same axis ranges to compare them.
func (s *Set) AddGrid(panels [][]*plot.Plot, name, heading, of string, w, h vg.Length, data Data) error {
	base := filepath.Join(s.Dir, name)
	if err := writeCSV(base+".csv", data); err != nil {
		return err
	}
	for _, row := range panels {
		for _, p := range row {
			if p != nil {
				style(p)
			}
		}
	}
	// Its place among the figures is taken now, in the order added.
	s.mu.Lock()
	i := len(s.Figures)
	s.Figures = append(s.Figures, Figure{Name: name, Heading: heading, Of: of, CSV: name + ".csv"})
	s.mu.Unlock()
	draw := func() error {
		svg, err := drawWithin(panels, base, w, h)
		s.mu.Lock()
		defer s.mu.Unlock()
		f := &s.Figures[i]
		switch {
		case err != nil:
			return err
		case svg == nil:
			f.Of = fmt.Sprintf("%s. Not drawn: it took longer than %v; its data is in %s.csv", of, DrawTimeout, name)
		default:
			f.SVG = template.HTML(svg)
		}
		return nil
	}
	if !s.Parallel {
		return draw()
	}
	s.drawing.Go(func() {
		drawSlots <- struct{}{}
		defer func() { <-drawSlots }()
		if err := draw(); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	})
	return nil
}

// drawWithin draws panels' files and gives the SVG to inline, or nil if
// that took longer than DrawTimeout: values a store should never hold
// (spans past what a float can subtract, a billion ticks) must not hold
// the whole report, and the figure's data is kept.
func drawWithin(panels [][]*plot.Plot, base string, w, h vg.Length) ([]byte, error) {
	type drawn struct {
		svg []byte
		err error
	}
	done := make(chan drawn, 1)
	go func() {
		svg, err := save(panels, base, w, h)
		for _, row := range panels {
			for _, p := range row {
				legendPanels.Delete(p)
				fixedRows.Delete(p)
			}
		}
		done <- drawn{svg, err}
	}()
	var svg []byte
	select {
	case d := <-done:
		if d.err != nil {
			return nil, d.err
		}
		svg = d.svg
	case <-time.After(DrawTimeout):
		return nil, nil
	}
	// Inline SVG: drop the XML prolog, and the fonts, which the page
	// declares once (FontCSS) for all its figures.
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		svg = svg[i:]
	}
	return takeFonts(svg), nil
}

var (
	fontsMu sync.Mutex
	fonts   = map[string]bool{} // @font-face rules the figures drawn so far use
)

// takeFonts removes an SVG's embedded font declarations, keeping them
// for FontCSS.
func takeFonts(svg []byte) []byte {
	start := bytes.Index(svg, []byte("<defs>"))
	end := bytes.Index(svg, []byte("</defs>"))
	if start < 0 || end < start || !bytes.Contains(svg[start:end], []byte("@font-face")) {
		return svg
	}
	fontsMu.Lock()
	for _, rule := range strings.SplitAfter(string(svg[start:end]), "}") {
		if i := strings.Index(rule, "@font-face"); i >= 0 {
			fonts[strings.TrimSpace(rule[i:])] = true
		}
	}
	fontsMu.Unlock()
	return append(svg[:start:start], svg[end+len("</defs>"):]...)
}

// FontCSS declares the fonts of every figure drawn so far, embedded, for
// a page that inlines them: text renders the same on every machine.
func FontCSS() template.CSS {
	fontsMu.Lock()
	defer fontsMu.Unlock()
	return template.CSS(strings.Join(slices.Sorted(maps.Keys(fonts)), "\n"))
}

// LegendPanel moves p's legend into a panel of its own, for small
// multiples whose panels are too full to hold it. Two columns wide it
// takes a panel's place; one column wide, where half the width cannot
// hold its labels, it is drawn below the panels across the whole width.
func LegendPanel(p *plot.Plot) *plot.Plot {
	lp := plot.New()
	lp.HideAxes()
	lp.Legend = p.Legend
	lp.Legend.Top, lp.Legend.Left = true, true
	lp.Legend.XOffs, lp.Legend.YOffs = 0, 0
	p.Legend = plot.NewLegend()
	legendPanels.Store(lp, true)
	return lp
}

// legendPanels are the panels LegendPanel made, until their figure is
// saved.
var legendPanels sync.Map

// fixedRows are the panels drawn at their designed height at any width,
// until their figure is saved: rows of text and bars sized in points
// (Bars), which a narrower figure shrunk in proportion laid over each
// other (12 bars of 12 pt in rows 8.5 pt apart, one column wide).
var fixedRows sync.Map

// Rows lays panels out in rows of cols, the last row padded with nil.
func Rows(panels []*plot.Plot, cols int) [][]*plot.Plot {
	cols = max(1, min(cols, len(panels)))
	var out [][]*plot.Plot
	for i := 0; i < len(panels); i += cols {
		row := make([]*plot.Plot, cols)
		copy(row, panels[i:min(i+cols, len(panels))])
		out = append(out, row)
	}
	return out
}

// Files lists the files of the set's figures: SVG, PDF and PNG at each
// size (Suffixes).
func (s *Set) Files() []string {
	var out []string
	for _, f := range s.Figures {
		for _, suffix := range Suffixes {
			out = append(out, filepath.Join(s.Dir, f.Name+suffix))
		}
	}
	return out
}

func writeCSV(path string, d Data) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(d.Header)
	// Labels come from stores and resolvers; one row's cells at a time
	// (the writer keeps none).
	var safe []string
	for _, row := range d.Rows {
		safe = safe[:0]
		for _, c := range row {
			safe = append(safe, sheet.Cell(c))
		}
		w.Write(safe)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// Colors are the transports' colours, the same in every figure, from
// the protocol table (Okabe-Ito's palette, which readers with any
// colour-vision deficiency can tell apart), and the coalescing
// experiment's DNS modes.
var Colors = func() map[string]color.Color {
	m := map[string]color.Color{
		// The coalescing experiment's DNS modes: grey for the paper's
		// emulation, Tol's wine and dark green for the real coalescing.
		"doq-emulated": color.RGBA{0x88, 0x88, 0x88, 0xff}, "doh3-coalesced": color.RGBA{0x88, 0x22, 0x55, 0xff}, "dnsstream": color.RGBA{0x11, 0x77, 0x33, 0xff},
	}
	for _, p := range protocol.All {
		m[p.Name] = p.Color
	}
	return m
}()

// Glyphs are the transports' markers, from the protocol table, so that
// a line is told apart without its colour; the coalescing experiment's
// DNS modes have theirs.
var Glyphs = func() map[string]draw.GlyphDrawer {
	m := map[string]draw.GlyphDrawer{"doq-emulated": draw.RingGlyph{}, "doh3-coalesced": draw.PyramidGlyph{}, "dnsstream": draw.SquareGlyph{}}
	for _, p := range protocol.All {
		m[p.Name] = Shapes[p.Marker]
	}
	return m
}()

// Shapes are the markers the protocol table names.
var Shapes = map[string]draw.GlyphDrawer{
	"circle": draw.CircleGlyph{}, "ring": draw.RingGlyph{}, "square": draw.SquareGlyph{}, "box": draw.BoxGlyph{},
	"triangle": draw.TriangleGlyph{}, "pyramid": draw.PyramidGlyph{}, "cross": draw.CrossGlyph{}, "plus": draw.PlusGlyph{},
}

// Marks are glyphs on a line at a few of its points, evenly spaced, the
// i-th line's shifted so that lines that run together keep their marks
// apart; nil when g is nil or there are no points.
func Marks(pts plotter.XYs, c color.Color, g draw.GlyphDrawer, i int) *plotter.Scatter {
	if g == nil || len(pts) == 0 {
		return nil
	}
	var at plotter.XYs
	for _, f := range []float64{0.2, 0.5, 0.8} {
		f += 0.035 * float64(i%5)
		at = append(at, pts[min(len(pts)-1, int(f*float64(len(pts))))])
	}
	return marks(at, c, g)
}

// Labels name the series that are not a transport of package protocol.
var Labels = map[string]string{"doq-emulated": "DoQ emulated", "doh3-coalesced": "DoH/3 coalesced", "dnsstream": "DNS stream"}

// Label is a transport's name in figures and tables, the papers' (the
// protocol table's: DoUDP, DoT, DoH, DoQ, ...), else Labels', else its own.
func Label(transport string) string {
	p, _ := protocol.Lookup(transport)
	return cmp.Or(p.Label, Labels[transport], transport)
}

// Share formats a fraction as a whole percentage, "–" for NaN.
func Share(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// Blue and Red are the two colours of figures that compare two things
// (Okabe-Ito blue and vermillion).
var (
	Blue = color.RGBA{0x00, 0x72, 0xb2, 0xff}
	Red  = color.RGBA{0xd5, 0x5e, 0x00, 0xff}
)

// Series is one line of a CDF.
type Series struct {
	Label  string
	Color  color.Color      // nil: black
	Dashes []vg.Length      // nil: solid
	Glyph  draw.GlyphDrawer // marks on the line (Glyphs); nil for none
	Values []float64        // sorted in place when drawn; drawn as Dist is, from at most MaxCDFPoints
	// Dist, if set, is drawn instead of Values: from at most MaxCDFPoints
	// of its order statistics, so a line of 10 million samples is as
	// small and fast as one of a thousand.
	Dist *stats.Dist
	// Band shades the 95 % confidence band of the empirical CDF
	// (Dvoretzky-Kiefer-Wolfowitz: ±sqrt(ln(2/0.05)/2n), distribution
	// free), so a reader sees which lines the samples really tell apart.
	Band bool
}

// MaxCDFPoints is the most points a CDF line is drawn from.
const MaxCDFPoints = 2000

// points are the series' empirical CDF and its sample size.
func (s *Series) points() ([]stats.Point, int) {
	if s.Dist != nil {
		return s.Dist.CDF(MaxCDFPoints), s.Dist.N()
	}
	vals := slices.DeleteFunc(s.Values, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
	slices.Sort(vals)
	return stats.SortedCDF(vals, MaxCDFPoints), len(vals)
}

// dkwBand is the polygon of the 95 % DKW band of a sample of n whose
// empirical CDF passes through pts.
func dkwBand(pts []stats.Point, n int) plotter.XYs {
	eps := math.Sqrt(math.Log(2/stats.Alpha) / (2 * float64(n)))
	var upper, lower plotter.XYs
	before := 0.0
	for _, p := range pts {
		upper = append(upper, plotter.XY{X: p.X, Y: min(1, before+eps)}, plotter.XY{X: p.X, Y: min(1, p.P+eps)})
		lower = append(lower, plotter.XY{X: p.X, Y: max(0, before-eps)}, plotter.XY{X: p.X, Y: max(0, p.P-eps)})
		before = p.P
	}
	slices.Reverse(lower)
	return append(upper, lower...)
}

// CDFWidth and CDFHeight are the size CDFs are saved in.
const CDFWidth, CDFHeight = 7 * vg.Inch, 4.5 * vg.Inch

// CDF plots the empirical CDF of each series, with room on the right for
// its legend. signed lets the x axis go below zero (relative changes).
func CDF(ss []*Series, title, xlabel string, signed bool) (*plot.Plot, Data, error) {
	return cdf(ss, title, xlabel, signed, true)
}

// CDFPanel is CDF for a panel of small multiples whose legend goes to a
// LegendPanel: no room is kept for it.
func CDFPanel(ss []*Series, title, xlabel string, signed bool) (*plot.Plot, Data, error) {
	return cdf(ss, title, xlabel, signed, false)
}

func cdf(ss []*Series, title, xlabel string, signed, legendRoom bool) (*plot.Plot, Data, error) {
	data := Data{Header: []string{"series", "value", "cdf"}}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "CDF"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(8)
	lo, hi := math.Inf(1), math.Inf(-1)
	type line struct {
		s    *Series
		cdf  []stats.Point
		size int
	}
	var lines []line
	for _, s := range ss {
		cdf, size := s.points()
		if size == 0 {
			continue
		}
		lines = append(lines, line{s, cdf, size})
		lo, hi = min(lo, cdf[0].X), max(hi, cdf[len(cdf)-1].X)
	}
	if len(lines) > 0 && !drawable(lo, hi) {
		// Values no axis can span (±1e308: their difference is not a
		// number): the panel says so, the data goes to the CSV.
		for _, ln := range lines {
			for _, c := range ln.cdf {
				data.Add(ln.s.Label, c.X, c.P)
			}
		}
		p.Title.Text += " (values too far apart to draw: see the CSV)"
		return p, data, nil
	}
	n := 0
	for _, ln := range lines {
		s, cdf, size := ln.s, ln.cdf, ln.size
		n++
		pts := make(plotter.XYs, 0, 2*len(cdf))
		before := 0.0
		for _, c := range cdf {
			pts = append(pts, plotter.XY{X: c.X, Y: before}, plotter.XY{X: c.X, Y: c.P})
			data.Add(s.Label, c.X, c.P)
			before = c.P
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, data, err
		}
		l.Color = s.Color
		if l.Color == nil {
			l.Color = color.Black
		}
		if s.Band && size > 1 {
			band, err := plotter.NewPolygon(dkwBand(cdf, size))
			if err != nil {
				return nil, data, err
			}
			r, g, b, _ := l.Color.RGBA()
			band.Color = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0x30}
			band.LineStyle.Width = 0
			p.Add(thinPolygon{band})
		}
		l.Width = vg.Points(1.5)
		l.Dashes = s.Dashes
		p.Add(newEdgeLine(l))
		if m := cdfMarks(cdf, l.Color, s.Glyph, n-1); m != nil {
			p.Add(m)
			p.Legend.Add(s.Label, l, m)
		} else {
			p.Legend.Add(s.Label, l)
		}
	}
	if n == 0 {
		p.Title.Text += " (no data)"
	} else {
		// Room on the right for the legend, so it never covers a line.
		span := max(hi-lo, 0.5)
		p.X.Min, p.X.Max = lo-0.05*span, hi+0.05*span
		if legendRoom {
			p.X.Max = hi + 0.45*span
		}
		if !signed {
			p.X.Min = max(0, p.X.Min)
		}
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, data, nil
}

// drawable says whether an axis from lo to hi, with room around it, can
// be drawn: its span and its ends padded must be finite numbers.
func drawable(lo, hi float64) bool {
	span := hi - lo
	return !math.IsInf(span, 0) && !math.IsNaN(span) && !math.IsInf(hi+0.5*span, 0) && !math.IsInf(lo-0.5*span, 0)
}

// cdfMarks marks a CDF where it crosses 0.2, 0.5 and 0.8 (shifted up for
// the i-th line), so marks sit on the rising part, not on the flat tail.
func cdfMarks(cdf []stats.Point, c color.Color, g draw.GlyphDrawer, i int) *plotter.Scatter {
	if g == nil || len(cdf) == 0 {
		return nil
	}
	var at plotter.XYs
	for _, f := range []float64{0.2, 0.5, 0.8} {
		f += 0.035 * float64(i%5)
		j, _ := slices.BinarySearchFunc(cdf, f, func(p stats.Point, f float64) int { return cmp.Compare(p.P, f) })
		j = min(j, len(cdf)-1)
		at = append(at, plotter.XY{X: cdf[j].X, Y: f})
	}
	return marks(at, c, g)
}

func marks(at plotter.XYs, c color.Color, g draw.GlyphDrawer) *plotter.Scatter {
	s, err := plotter.NewScatter(at)
	if err != nil {
		return nil
	}
	s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = c, g, vg.Points(2.5)
	return s
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

// Extent is the largest |z| over cols × rows that is not NaN; 0 if none.
func Extent(cols, rows []string, z func(col, row string) float64) float64 {
	lo, hi := grid{cols: cols, rows: rows, z: z}.extent()
	if lo > hi { // no value
		return 0
	}
	return max(math.Abs(lo), math.Abs(hi))
}

// extent is the smallest and largest value that is not NaN; +Inf, -Inf
// (lo > hi) if none.
func (g grid) extent() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, c := range g.cols {
		for _, r := range g.rows {
			if z := g.z(c, r); !math.IsNaN(z) {
				lo, hi = min(lo, z), max(hi, z)
			}
		}
	}
	return lo, hi
}

// HeatMap plots z, a relative change in percent, per column (x) and row
// (y), each cell labelled; zero is white, blue faster, red slower. The
// colour scale spans ±scale, or ±the largest |z| when scale is 0: give
// small multiples one scale. It returns the size to save it in.
func HeatMap(cols, rows []string, z func(col, row string) float64, scale float64, title, xlabel, ylabel string) (*plot.Plot, vg.Length, vg.Length, Data, error) {
	data := Data{Header: []string{xlabel, ylabel, "value"}}
	g := grid{cols: cols, rows: rows, z: z}
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(9)
	m := scale
	if m <= 0 {
		m = max(Extent(cols, rows, z), 1)
	}
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
			data.Add(col, row, z(col, row))
			text := "–"
			if v := z(col, row); !math.IsNaN(v) {
				text = fmt.Sprintf("%+.1f%%", v)
			}
			labels.Labels = append(labels.Labels, text)
		}
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, 0, 0, data, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = -0.5, -0.5
		l.TextStyle[i].Font.Size = valueSize
		if v := z(cols[int(labels.XYs[i].X)], rows[int(labels.XYs[i].Y)]); math.Abs(v) > 0.6*m {
			l.TextStyle[i].Color = color.White // legible on a dark cell
		}
	}
	p.Add(l)
	p.X.Tick.Marker, p.Y.Tick.Marker = Names(cols), Names(rows)
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Min, p.X.Max = -0.5, float64(len(cols))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	return p, vg.Length(1.4*float64(len(cols))+1.5) * vg.Inch, vg.Length(0.8*float64(len(rows))+1.4) * vg.Inch, data, nil
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

// Funcs are the formats the report's tables share, each "–" for no
// data: f (two decimals), ms (one decimal), pct (a relative change),
// share (a fraction as a percentage), ci and ci1 (a median's 95 %
// interval, two and one decimals), mci, mci1 and mci0 (a median with its
// interval in one cell), delta (a comparison with its
// baseline, benchstat's way: "+15.1 % (p=0.008 n=10+10)" or "~ (…)").
var Funcs = template.FuncMap{
	"f":      func(v float64) string { return stats.F(v, 2) },
	"ms":     func(v float64) string { return stats.F(v, 1) },
	"pct":    Pct,
	"share":  Share,
	"ci":     func(s stats.Summary) string { return s.CI(2) },
	"mci":    func(s stats.Summary) string { return s.Cell(2) },
	"mci1":   func(s stats.Summary) string { return s.Cell(1) },
	"mci0":   func(s stats.Summary) string { return s.Cell(0) },
	"ci1":    func(s stats.Summary) string { return s.CI(1) },
	"delta":  func(c stats.Comparison) string { return c.FormatDelta() },
	"failed": stats.Counts,
	"label":  Label,
}

package figure

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/doxlab/doxlab/internal/buildinfo"
)

// A paper's column widths: every figure is saved at both, its text at
// 8-9 pt when printed at that width. The page shows the two-column one.
const (
	TwoColumns = 7 * vg.Inch
	OneColumn  = 3.5 * vg.Inch
)

// Text sizes at print size.
var (
	titleSize  = vg.Points(9)
	labelSize  = vg.Points(9)
	tickSize   = vg.Points(8)
	legendSize = vg.Points(8)
	valueSize  = vg.Points(8) // labels drawn on the data: bar values, heat map cells
)

// DPI is the resolution of the PNGs, fit to print.
const DPI = 300

// size is one of the widths a figure is saved at.
type size struct {
	suffix string // appended to the file name
	width  vg.Length
	cols   int // the most panels a row holds at this width; 0: as designed
}

var sizes = []size{{"", TwoColumns, 0}, {"-1col", OneColumn, 2}}

// Suffixes are the files each figure is saved as, beside its CSV.
var Suffixes = func() []string {
	var out []string
	for _, s := range sizes {
		for _, f := range []string{"svg", "pdf", "png"} {
			out = append(out, s.suffix+"."+f)
		}
	}
	return out
}()

// style sets p's text to the print sizes and gives a linear y axis room
// above and below its data, so nothing is drawn on the frame.
func style(p *plot.Plot) {
	p.Title.TextStyle.Font.Size = titleSize
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = labelSize, labelSize
	p.X.Tick.Label.Font.Size, p.Y.Tick.Label.Font.Size = tickSize, tickSize
	p.Legend.TextStyle.Font.Size = legendSize
	p.Legend.ThumbnailWidth = vg.Points(18)
	logHeadroom(p)
	linearHeadroom(p)
}

// linearHeadroom widens a linear y axis by 4 % of its span at each end
// that has data on it. Categorical axes (named ticks) keep theirs.
func linearHeadroom(p *plot.Plot) {
	if _, ok := p.Y.Scale.(plot.LinearScale); !ok {
		return
	}
	if _, named := p.Y.Tick.Marker.(plot.ConstantTicks); named || p.Y.Max <= p.Y.Min {
		return
	}
	pad := 0.04 * (p.Y.Max - p.Y.Min)
	p.Y.Max += pad
	if p.Y.Min != 0 { // a zero baseline stays on the axis
		p.Y.Min -= pad
	}
}

// minPanelHeight is the least height a panel is drawn in: room for its
// title, its axes and a few lines of data at print size.
const minPanelHeight = 1.6 * vg.Inch

// drawing is a figure laid out for one size.
type drawing struct {
	panels  [][]*plot.Plot
	legends []*plot.Plot // LegendPanels drawn below the panels, across the width
	width   vg.Length
	height  vg.Length
	strip   vg.Length // the legends' height
}

// layout lays panels out at sz: rows of at most sz.cols, the legend
// panels then moved below them. A panel is never stretched taller than
// designed nor drawn shorter than minPanelHeight, and the panels' height
// stays between 2 and 9 inches.
func layout(panels [][]*plot.Plot, w, h vg.Length, sz size) drawing {
	rows, cols := len(panels), len(panels[0])
	panelW, panelH := w/vg.Length(cols), h/vg.Length(rows)
	d := drawing{panels: panels, width: sz.width}
	if sz.cols == 0 {
		// A legend panel whose entries are wider than the panel it is
		// given would be cut: it goes to the strip below, full width.
		pw := sz.width/vg.Length(cols) - 2*margin
		var kept [][]*plot.Plot
		for _, row := range panels {
			row = slices.Clone(row)
			for i, p := range row {
				if _, legend := legendPanels.Load(p); legend && legendWidth(p) > pw {
					d.legends, row[i] = append(d.legends, p), nil
				}
			}
			if slices.ContainsFunc(row, func(p *plot.Plot) bool { return p != nil }) {
				kept = append(kept, row)
			}
		}
		d.panels = kept
		rows = len(kept)
	}
	if sz.cols > 0 {
		var flat []*plot.Plot
		for _, row := range panels {
			for _, p := range row {
				if _, legend := legendPanels.Load(p); legend {
					d.legends = append(d.legends, p)
				} else if p != nil {
					flat = append(flat, p)
				}
			}
		}
		d.panels = Rows(flat, min(cols, sz.cols))
		rows, cols = len(d.panels), len(d.panels[0])
	}
	for _, lp := range d.legends {
		r := lp.Legend.Rectangle(draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: sz.width, Y: 100 * vg.Inch}}})
		d.strip = max(d.strip, r.Max.Y-r.Min.Y+vg.Millimeter*3)
	}
	pw := sz.width / vg.Length(cols)
	ph := max(panelH*min(1, pw/panelW), minPanelHeight)
	if allFixedRows(d.panels) {
		ph = panelH
	}
	d.height = min(max(ph*vg.Length(rows), 2*vg.Inch), 9*vg.Inch) + d.strip
	return d
}

// allFixedRows says whether every panel of panels keeps its designed
// height at any width (fixedRows).
func allFixedRows(panels [][]*plot.Plot) bool {
	n := 0
	for _, row := range panels {
		for _, p := range row {
			if p == nil {
				continue
			}
			if _, ok := fixedRows.Load(p); !ok {
				return false
			}
			n++
		}
	}
	return n > 0
}

// legendWidth is how wide a legend panel's entries are drawn.
func legendWidth(lp *plot.Plot) vg.Length {
	r := lp.Legend.Rectangle(draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: 100 * vg.Inch, Y: 100 * vg.Inch}}})
	return r.Max.X - r.Min.X
}

// render draws d on c, a margin inside its edges, each panel's words fit
// to the room it has there.
func render(d drawing, c vg.CanvasWriterTo) {
	dc := draw.Crop(draw.New(c), margin, -margin, margin, -margin)
	if len(d.legends) > 0 {
		strip := draw.Crop(dc, 0, 0, 0, -(dc.Max.Y - dc.Min.Y - d.strip))
		w := (strip.Max.X - strip.Min.X) / vg.Length(len(d.legends))
		for i, lp := range d.legends {
			lp.Legend.Draw(draw.Crop(strip, vg.Length(i)*w, -(vg.Length(len(d.legends)-i-1) * w), 0, 0))
		}
		dc = draw.Crop(dc, 0, 0, d.strip, 0)
	}
	panels := d.panels
	tiles := draw.Tiles{Rows: len(panels), Cols: len(panels[0]), PadX: vg.Millimeter * 3, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	place := func() [][]draw.Canvas {
		if len(panels) == 1 && len(panels[0]) == 1 {
			return [][]draw.Canvas{{dc}}
		}
		return plot.Align(panels, tiles, dc)
	}
	// Words first, which set the axes' room; then ticks, thinned to
	// the data area that room leaves; then the final places.
	canvases := place()
	var fitted []*fitting
	for j, row := range panels {
		for i, p := range row {
			if p != nil {
				f := wrapWords(p, canvases[j][i])
				defer f.undo()
				fitted = append(fitted, f)
			}
		}
	}
	canvases = place()
	k := 0
	for j, row := range panels {
		for i, p := range row {
			if p != nil {
				fitted[k].thin(canvases[j][i])
				k++
			}
		}
	}
	canvases = place()
	for j, row := range panels {
		for i, p := range row {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
}

// fastPNG is vgimg's canvas written as a PNG at zlib's fastest level: a
// figure of flat colours loses little to it (a few percent larger),
// and png.Encode's default level was a quarter of a report's drawing.
// Its rows go unfiltered (encodePNG).
type fastPNG struct{ *vgimg.Canvas }

func (c fastPNG) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	err := encodePNG(cw, c.Image())
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// pdfCanvas is vgpdf's canvas given colours as the PDF takes them:
// vgpdf sets a fill from a colour's premultiplied RGBA and then its
// alpha again, so a translucent band came out dark grey, not the PNG's
// and SVG's light tint.
type pdfCanvas struct{ *vgpdf.Canvas }

func (c pdfCanvas) SetColor(clr color.Color) {
	if clr != nil {
		clr = straight(color.NRGBAModel.Convert(clr).(color.NRGBA))
	}
	c.Canvas.SetColor(clr)
}

// straight is a colour whose RGBA gives its channels not premultiplied:
// what vgpdf reads them as.
type straight color.NRGBA

func (s straight) RGBA() (r, g, b, a uint32) {
	return uint32(s.R) * 0x101, uint32(s.G) * 0x101, uint32(s.B) * 0x101, uint32(s.A) * 0x101
}

// save draws panels at every size as SVG, PDF and PNG; it returns the
// two-column SVG, for the page. The two-column SVG is drawn first, and
// where the files beside it are those this binary drew from the same
// SVG (a report made again into its directory, of data that did not
// change) they are kept, not drawn again: see drawnBefore.
func save(panels [][]*plot.Plot, base string, w, h vg.Length) ([]byte, error) {
	var page []byte
	var sum drawnSum
	for _, sz := range sizes {
		d := layout(panels, w, h, sz)
		for _, format := range []string{"svg", "pdf", "png"} {
			if page != nil && sum.files == nil {
				if sum.key = drawnKey(page); drawnBefore(base, sum.key) {
					return page, nil
				}
			}
			var c vg.CanvasWriterTo
			switch format {
			case "svg":
				// The fonts go inside the file: a reader's machine may lack
				// Liberation Serif, and a wider stand-in cuts labels off.
				c = vgsvg.NewWith(vgsvg.UseWH(d.width, d.height), vgsvg.EmbedFonts(true))
			case "pdf":
				pc := vgpdf.New(d.width, d.height)
				pc.EmbedFonts(true)
				c = pdfCanvas{pc}
			case "png":
				c = fastPNG{vgimg.NewWith(vgimg.UseWH(d.width, d.height), vgimg.UseDPI(DPI))}
			}
			render(d, c)
			var b bytes.Buffer
			if _, err := c.WriteTo(&b); err != nil {
				return nil, fmt.Errorf("drawing %s%s.%s: %w", base, sz.suffix, format, err)
			}
			name := base + sz.suffix + "." + format
			if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
				return nil, err
			}
			if page == nil {
				page = b.Bytes()
			} else {
				sum.files = append(sum.files, fileSum{filepath.Base(name), sha256.Sum256(b.Bytes())})
			}
		}
	}
	sum.write(base)
	return page, nil
}

// drawnDir, in a figure's directory, keeps what was drawn there: for
// each figure the key of its two-column SVG and the digests of the
// other files drawn with it.
const drawnDir = ".drawn"

// drawnKey is the key of a figure whose two-column SVG is page: the
// binary that drew it (its version and Go build ID, as a report's
// summaries are marked) and the SVG's digest. "" where the binary's ID
// cannot be read: then nothing is kept.
func drawnKey(page []byte) string {
	id := buildinfo.BinaryID()
	if id == "" {
		return ""
	}
	return fmt.Sprintf("%s %s %x", buildinfo.Version(), id, sha256.Sum256(page))
}

type fileSum struct {
	name   string
	digest [sha256.Size]byte
}

type drawnSum struct {
	key   string
	files []fileSum
}

func drawnPath(base string) string {
	return filepath.Join(filepath.Dir(base), drawnDir, filepath.Base(base))
}

// write keeps sum for the figure at base, if it has a key; a sum that
// cannot be written only means drawing again.
func (sum drawnSum) write(base string) {
	if sum.key == "" {
		return
	}
	var b strings.Builder
	b.WriteString(sum.key + "\n")
	for _, f := range sum.files {
		fmt.Fprintf(&b, "%x %s\n", f.digest, f.name)
	}
	p := drawnPath(base)
	if os.MkdirAll(filepath.Dir(p), 0o755) == nil {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}
}

// drawnBefore says whether the figure at base was drawn with key (by
// this binary, from the same two-column SVG: drawnKey), and its other
// files are still as drawn: every one named in its sum, none changed
// since.
func drawnBefore(base, key string) bool {
	b, err := os.ReadFile(drawnPath(base))
	if key == "" || err != nil {
		return false
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != key || len(lines) != len(Suffixes) {
		return false
	}
	for _, l := range lines[1:] {
		digest, name, ok := strings.Cut(l, " ")
		if !ok || name != filepath.Base(name) || !strings.HasPrefix(name, filepath.Base(base)) {
			return false
		}
		f, err := os.ReadFile(filepath.Join(filepath.Dir(base), name))
		if err != nil || fmt.Sprintf("%x", sha256.Sum256(f)) != digest {
			return false
		}
	}
	return true
}

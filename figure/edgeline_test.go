package figure

import (
	"bytes"
	"image"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// staircase is a CDF's line as cdf draws it: steps of n normal values.
func staircase(n int) plotter.XYs {
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]float64, n)
	for i := range v {
		v[i] = 40 + 8*r.NormFloat64()
	}
	slices.Sort(v)
	pts := make(plotter.XYs, 0, 2*n)
	before := 0.0
	for i, x := range v {
		p := float64(i+1) / float64(n)
		pts = append(pts, plotter.XY{X: x, Y: before}, plotter.XY{X: x, Y: p})
		before = p
	}
	return pts
}

// TestEdgeLinePadsAsALine: a line that reports the glyph boxes of its
// extreme points alone leaves the data area gonum's Line leaves, which
// reports one per point.
func TestEdgeLinePadsAsALine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pts := make(plotter.XYs, 1000)
	for i := range pts {
		pts[i] = plotter.XY{X: r.NormFloat64(), Y: r.ExpFloat64()}
	}
	area := func(add func(*plot.Plot, *plotter.Line)) vg.Rectangle {
		p := plot.New()
		l, err := plotter.NewLine(pts)
		require.NoError(t, err)
		l.Width = vg.Points(6) // wide: its padding shows
		add(p, l)
		return p.DataCanvas(draw.New(vgsvg.New(4*vg.Inch, 3*vg.Inch))).Rectangle
	}
	line := area(func(p *plot.Plot, l *plotter.Line) { p.Add(l) })
	edge := area(func(p *plot.Plot, l *plotter.Line) { p.Add(newEdgeLine(l)) })
	require.Equal(t, line, edge)
	require.NotEqual(t, area(func(*plot.Plot, *plotter.Line) {}), line, "the wide line pads the area")
	l, err := plotter.NewLine(pts)
	require.NoError(t, err)
	require.Len(t, newEdgeLine(l).GlyphBoxes(plot.New()), 4)
}

// TestThinLineDrawsTheSamePixels: a CDF of 2,000 values drawn through
// its thinned vertices is, at the PNGs' 300 dpi, the picture gonum's
// Line draws through all of them, and its SVG a fraction of the size.
func TestThinLineDrawsTheSamePixels(t *testing.T) {
	pts := staircase(2000)
	draw1 := func(thinned bool) (*image.RGBA, []byte) {
		p := plot.New()
		l, err := plotter.NewLine(pts)
		require.NoError(t, err)
		l.Width = vg.Points(1.5)
		if thinned {
			p.Add(newEdgeLine(l))
		} else {
			p.Add(l)
		}
		c := vgimg.NewWith(vgimg.UseWH(TwoColumns, 3*vg.Inch), vgimg.UseDPI(DPI))
		p.Draw(draw.New(c))
		s := vgsvg.New(TwoColumns, 3*vg.Inch)
		p.Draw(draw.New(s))
		var b bytes.Buffer
		_, err = s.WriteTo(&b)
		require.NoError(t, err)
		return c.Image().(*image.RGBA), b.Bytes()
	}
	whole, wholeSVG := draw1(false)
	thinned, thinSVG := draw1(true)
	// The same picture to within a pixel: every pixel one drawing inks
	// more than half has ink within a pixel of it in the other.
	within := func(a, b *image.RGBA) (inked, stray int) {
		dark := func(img *image.RGBA, x, y int) int { return 255 - int(img.Pix[img.PixOffset(x, y)]) }
		r := a.Rect
		for y := r.Min.Y + 1; y < r.Max.Y-1; y++ {
			for x := r.Min.X + 1; x < r.Max.X-1; x++ {
				if dark(a, x, y) <= 128 {
					continue
				}
				inked++
				near := false
				for dy := -1; dy <= 1 && !near; dy++ {
					for dx := -1; dx <= 1 && !near; dx++ {
						near = dark(b, x+dx, y+dy) > 64
					}
				}
				if !near {
					stray++
				}
			}
		}
		return inked, stray
	}
	inked, stray := within(whole, thinned)
	_, strayBack := within(thinned, whole)
	t.Logf("%d inked pixels, %d and %d with no ink of the other within a pixel; SVG %d → %d octets", inked, stray, strayBack, len(wholeSVG), len(thinSVG))
	require.Greater(t, inked, 10000)
	require.Zero(t, stray)
	require.Zero(t, strayBack)
	require.Less(t, strings.Count(string(thinSVG), "L"), strings.Count(string(wholeSVG), "L")/4)
}

// TestThinKeepsThePath: every vertex thin leaves out lies within the
// tolerance of the segment drawn past it; the ends' segments are kept;
// a path with no vertex to spare is kept whole.
func TestThinKeepsThePath(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		ps := make([]vg.Point, 2+r.IntN(400))
		x := vg.Length(0)
		for i := range ps {
			x += vg.Length(r.ExpFloat64() * 0.2)
			ps[i] = vg.Point{X: x, Y: vg.Length(r.NormFloat64())}
		}
		orig := slices.Clone(ps)
		tol := vg.Length(r.Float64())
		kept := thin(ps, tol)
		if len(orig) >= 4 {
			require.Equal(t, orig[:2], kept[:2], "the ends keep their direction")
			require.Equal(t, orig[len(orig)-2:], kept[len(kept)-2:])
		}
		j := 0 // kept[j] is the last kept vertex at or before orig[i]
		for _, p := range orig {
			if j+1 < len(kept) && p == kept[j+1] {
				j++
				continue
			}
			if p == kept[j] {
				continue
			}
			require.LessOrEqual(t, segmentDistance(p, kept[j], kept[j+1]), tol)
		}
	}
	zigzag := []vg.Point{{X: 0, Y: 0}, {X: 1, Y: 1}, {X: 2, Y: 0}, {X: 3, Y: 1}, {X: 4, Y: 0}, {X: 5, Y: 1}}
	require.Equal(t, zigzag, thin(slices.Clone(zigzag), 0.5))
	require.Len(t, thin([]vg.Point{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 2, Y: 0.05}, {X: 3, Y: 0}, {X: 4, Y: 0}}, 0.1), 4)
}

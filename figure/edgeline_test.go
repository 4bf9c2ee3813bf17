package figure

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// TestEdgeLineDrawsAsALine: a line that reports the glyph boxes of its
// extreme points alone is drawn exactly as gonum's Line, which reports
// one per point: the same padding, the same SVG.
func TestEdgeLineDrawsAsALine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pts := make(plotter.XYs, 1000)
	for i := range pts {
		pts[i] = plotter.XY{X: r.NormFloat64(), Y: r.ExpFloat64()}
	}
	svg := func(add func(*plot.Plot, *plotter.Line)) []byte {
		p := plot.New()
		l, err := plotter.NewLine(pts)
		require.NoError(t, err)
		l.Width = vg.Points(6) // wide: its padding shows
		add(p, l)
		c := vgsvg.New(4*vg.Inch, 3*vg.Inch)
		p.Draw(draw.New(c))
		var b bytes.Buffer
		_, err = c.WriteTo(&b)
		require.NoError(t, err)
		return b.Bytes()
	}
	line := svg(func(p *plot.Plot, l *plotter.Line) { p.Add(l) })
	edge := svg(func(p *plot.Plot, l *plotter.Line) { p.Add(edgeLine{l}) })
	require.Equal(t, line, edge)
	l, err := plotter.NewLine(pts)
	require.NoError(t, err)
	require.Len(t, edgeLine{l}.GlyphBoxes(plot.New()), 4)
}

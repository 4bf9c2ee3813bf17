package figure

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"

	"github.com/doxlab/doxlab/internal/stats"
)

// TestDKWBandHoldsTheTrueCDF: the band a CDF shades is a 95 %
// confidence band: over many samples of a known distribution (uniform,
// whose CDF is x), the true CDF lies wholly inside the band of 95 % of
// them (Dvoretzky-Kiefer-Wolfowitz with Massart's constant, all but
// exact at this level); and a band is a closed polygon within [0, 1]
// around its empirical CDF, narrowing as the square root of n.
func TestDKWBandHoldsTheTrueCDF(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials, n = 2000, 50
	held := 0
	for range trials {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.Float64()
		}
		slices.Sort(v)
		pts := stats.SortedCDF(v, MaxCDFPoints)
		band := dkwBand(pts, n)
		require.Len(t, band, 4*len(pts))
		// The band's upper edge runs along the top of each step, its
		// lower edge back along the bottom: between points i and i+1
		// the empirical CDF is pts[i].P, and the band around it is
		// [lower, upper] at the step's start.
		inside := pts[0].X <= band[0].Y // before the first point the CDF is 0
		for i := range pts {
			upper := band[2*i+1].Y
			lower := band[len(band)-1-(2*i+1)].Y
			require.Equal(t, pts[i].X, band[2*i+1].X)
			require.GreaterOrEqual(t, upper, pts[i].P)
			require.LessOrEqual(t, lower, pts[i].P)
			require.True(t, upper <= 1 && lower >= 0)
			next := 1.0 // the true CDF's largest value on this step
			if i+1 < len(pts) {
				next = pts[i+1].X
			}
			inside = inside && next <= upper && pts[i].X >= lower
		}
		if inside {
			held++
		}
	}
	// Three standard errors either side of 95 %: a band of another
	// level (99 %, 90 %) falls outside.
	se := math.Sqrt(0.05 * 0.95 / trials)
	require.InDelta(t, 0.95, float64(held)/trials, 3*se, "%d of %d bands held the true CDF", held, trials)

	width := func(n int) float64 {
		pts := stats.SortedCDF([]float64{1, 2, 3, 4}, MaxCDFPoints)
		b := dkwBand(pts, n)
		return b[3].Y - pts[1].P // the upper edge over the second step
	}
	require.InDelta(t, width(100)/2, width(400), 1e-12, "four times the samples, half the width")
	require.InDelta(t, math.Sqrt(math.Log(2/0.05)/200), width(100), 1e-12)
}

// TestMarksKeepLinesApart: a line's marks sit at a fifth, half and four
// fifths of its points, each line's shifted, so that five lines running
// together show five sets of marks; none without a glyph or points.
func TestMarksKeepLinesApart(t *testing.T) {
	line := make(plotter.XYs, 1000)
	for i := range line {
		line[i] = plotter.XY{X: float64(i), Y: float64(i) / 1000}
	}
	seen := map[float64]bool{}
	for i := range 5 {
		m := Marks(line, Blue, draw.CircleGlyph{}, i)
		require.NotNil(t, m)
		require.Len(t, m.XYs, 3)
		for j, p := range m.XYs {
			require.False(t, seen[p.X], "line %d's mark at %v is another line's", i, p.X)
			seen[p.X] = true
			require.InDelta(t, 1000*([]float64{0.2, 0.5, 0.8}[j]+0.035*float64(i)), p.X, 1)
		}
	}
	require.Nil(t, Marks(line, Blue, nil, 0), "no glyph")
	require.Nil(t, Marks(nil, Blue, draw.CircleGlyph{}, 0), "no points")
	require.Len(t, Marks(line[:2], Blue, draw.CircleGlyph{}, 4).XYs, 3, "a short line's marks fall on its points")
}

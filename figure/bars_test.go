package figure

import (
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
)

func TestBarsLabelEachValue(t *testing.T) {
	p, w, h, d, err := Bars([]Bar{{Label: "a", Value: 12.5}, {Label: "b", Value: -3}, {Label: "c", Value: math.NaN()}}, "t", "x")
	require.NoError(t, err)
	require.Len(t, d.Rows, 3, "every bar in the data, none dropped")
	require.Equal(t, []string{"c", "NaN"}, d.Rows[2])
	require.Less(t, p.X.Min, -3.0, "room left of the lowest bar for its label")
	require.Greater(t, p.X.Max, 12.5)
	require.Greater(t, float64(h), 0.0)
	require.Greater(t, float64(w), float64(h))
}

// TestBarsOneColumnKeepRows: one column wide, a bar figure keeps its
// designed height, so that its bars (sized in points) stay apart: each
// of twelve bars is a run of its colour down some column of the PNG,
// where shrunk in proportion they ran into one.
func TestBarsOneColumnKeepRows(t *testing.T) {
	var bars []Bar
	for i := range 12 {
		bars = append(bars, Bar{Label: fmt.Sprintf("cell %d", i), Value: 1 + float64(i%3), Color: Blue, Text: "x"})
	}
	p, w, h, data, err := Bars(bars, "twelve", "value")
	require.NoError(t, err)
	require.Equal(t, float64(h), float64(layout([][]*plot.Plot{{p}}, w, h, sizes[1]).height), "designed height, one column wide")

	set := &Set{Dir: t.TempDir()}
	require.NoError(t, set.Add(p, "bars", "twelve bars", "", w, h, data))
	for _, name := range []string{"bars.png", "bars-1col.png"} {
		fh, err := os.Open(filepath.Join(set.Dir, name))
		require.NoError(t, err)
		img, err := png.Decode(fh)
		fh.Close()
		require.NoError(t, err)
		most := 0
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			runs, in := 0, false
			for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
				blue := color.RGBAModel.Convert(img.At(x, y)) == Blue
				if blue && !in {
					runs++
				}
				in = blue
			}
			most = max(most, runs)
		}
		require.Equal(t, 12, most, "%s: twelve bars apart", name)
	}
	require.Empty(t, fixedRowsLeft(p), "forgotten once saved")
}

func fixedRowsLeft(p *plot.Plot) []*plot.Plot {
	if _, ok := fixedRows.Load(p); ok {
		return []*plot.Plot{p}
	}
	return nil
}

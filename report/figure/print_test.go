package figure

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/protocol"
)

// TestEveryFigureIsSavedForPrint: SVG, PDF and 300-dpi PNG at one and
// two columns, each the width a paper's column has, and the CSV.
func TestEveryFigureIsSavedForPrint(t *testing.T) {
	var ss []*Series
	for _, p := range protocol.All {
		ss = append(ss, &Series{Label: p.Label, Color: Colors[p.Name], Glyph: Glyphs[p.Name], Values: []float64{1, 2, 3, 4}})
	}
	p, d, err := CDF(ss, "a title far longer than one column can hold on a single line of text", "an axis label that must wrap in one column", false)
	require.NoError(t, err)
	set := &Set{Dir: t.TempDir()}
	require.NoError(t, set.Add(p, "f", "heading", "", CDFWidth, CDFHeight, d))
	require.Len(t, set.Files(), 6)
	for _, f := range set.Files() {
		require.FileExists(t, f)
	}
	require.FileExists(t, filepath.Join(set.Dir, "f.csv"))
	for name, inches := range map[string]float64{"f.png": 7, "f-1col.png": 3.5} {
		fh, err := os.Open(filepath.Join(set.Dir, name))
		require.NoError(t, err)
		img, err := png.Decode(fh)
		fh.Close()
		require.NoError(t, err)
		require.Equal(t, int(inches*DPI+0.5), img.Bounds().Dx(), "%s is %g in at %d dpi", name, inches, DPI)
	}
	pdf, err := os.ReadFile(filepath.Join(set.Dir, "f-1col.pdf"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(pdf), "%PDF-"))
	require.Contains(t, string(pdf), "FontFile", "the font is embedded")
	svg := string(set.Figures[0].SVG)
	require.Contains(t, svg, `width="504pt"`, "the page's figure is the two-column one")
	require.Contains(t, svg, "font-size:8px", "ticks and legend at 8 pt")
	require.Contains(t, svg, "font-size:9px", "title and labels at 9 pt")
	require.Equal(t, "a title far longer than one column can hold on a single line of text", p.Title.Text, "wrapping is undone after drawing")
}

// TestWrapBreaksAtSpacesToFit: each line fits, no word is lost or split.
func TestWrapBreaksAtSpacesToFit(t *testing.T) {
	p := plot.New()
	style(p)
	s := "PLT increase over the baseline's median (%)"
	w := vg.Inch
	got := wrap(s, p.X.Label.TextStyle, w)
	require.Equal(t, s, strings.Join(strings.Split(got, "\n"), " "))
	for _, line := range strings.Split(got, "\n") {
		require.LessOrEqual(t, p.X.Label.TextStyle.Width(line), w, line)
	}
	require.Equal(t, "short", wrap("short", p.X.Label.TextStyle, w))
}

// TestThinTicksKeepDecadesAndNeverTouch: on a short log axis the labels
// left never come within 4 pt, and powers of ten go before 2s and 5s.
func TestThinTicksKeepDecadesAndNeverTouch(t *testing.T) {
	p := plot.New()
	style(p)
	th := thinTicks{inner: DecadeTicks{}, scale: plot.LogScale{}, style: p.Y.Tick.Label, room: vg.Inch, upright: true}
	var kept []plot.Tick
	for _, tk := range th.Ticks(0.4, 30) {
		if tk.Label != "" {
			kept = append(kept, tk)
		}
	}
	require.Equal(t, "1", kept[0].Label)
	require.Equal(t, "10", kept[1].Label)
	for i := 1; i < len(kept); i++ {
		gap := vg.Length(plot.LogScale{}.Normalize(0.4, 30, kept[i].Value)-plot.LogScale{}.Normalize(0.4, 30, kept[i-1].Value)) * vg.Inch
		require.Greater(t, float64(gap), float64(p.Y.Tick.Label.Height("1")), "%s and %s", kept[i-1].Label, kept[i].Label)
	}
	wide := thinTicks{inner: DecadeTicks{}, scale: plot.LogScale{}, style: p.Y.Tick.Label, room: 10 * vg.Inch, upright: true}
	n := 0
	for _, tk := range wide.Ticks(0.4, 30) {
		if tk.Label != "" {
			n++
		}
	}
	require.Greater(t, n, len(kept), "a long axis keeps its 2s and 5s")
}

// TestEveryTransportHasAMarker: the protocol table's markers are shapes
// the figures know, each transport's its own.
func TestEveryTransportHasAMarker(t *testing.T) {
	seen := map[string]string{}
	for _, p := range protocol.All {
		require.NotNil(t, Shapes[p.Marker], "%s's marker %q", p.Name, p.Marker)
		require.NotNil(t, Glyphs[p.Name])
		require.NotNil(t, Colors[p.Name])
		require.Empty(t, seen[p.Marker], "%s shares %s's marker", p.Name, seen[p.Marker])
		seen[p.Marker] = p.Name
	}
}

// TestOneColumnMovesTheLegendBelow: one column wide, a legend panel goes
// to a strip below the panels, which take the whole width.
func TestOneColumnMovesTheLegendBelow(t *testing.T) {
	a, b := plot.New(), plot.New()
	a.Legend.Add("x")
	lp := LegendPanel(a)
	defer legendPanels.Delete(lp)
	panels := [][]*plot.Plot{{a, lp}, {b, nil}}
	two := layout(panels, 7*vg.Inch, 5*vg.Inch, sizes[0])
	require.Empty(t, two.legends, "two columns keep the legend in its panel")
	one := layout(panels, 7*vg.Inch, 5*vg.Inch, sizes[1])
	require.Equal(t, []*plot.Plot{lp}, one.legends)
	require.Equal(t, [][]*plot.Plot{{a, b}}, one.panels)
	require.Greater(t, float64(one.strip), 0.0)
	require.GreaterOrEqual(t, float64(one.height), float64(2*vg.Inch+one.strip))
}

// TestTimelines: a panel per timeline, their points in the CSV under
// the figure's columns, saved for print like every figure.
func TestTimelines(t *testing.T) {
	set := &Set{Dir: t.TempDir()}
	require.NoError(t, set.AddTimelines(Timelines{Name: "bloat", Title: "RTT under one bulk TCP download", XLabel: "time (s)", YLabel: "RTT (ms)",
		Columns: [3]string{"profile", "sent s", "rtt ms"}, Panels: []Timeline{{Label: "dsl", X: []float64{0, 1, 2}, Y: []float64{40, 300, 310}}, {Label: "fiber"}}}))
	require.Len(t, set.Files(), 6)
	csv, err := os.ReadFile(filepath.Join(set.Dir, "bloat.csv"))
	require.NoError(t, err)
	require.Equal(t, "profile,sent s,rtt ms\ndsl,0,40\ndsl,1,300\ndsl,2,310\n", string(csv))
}

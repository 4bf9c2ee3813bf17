package figure

import (
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/internal/stats"
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

// TestWideLegendMovesBelow: two columns wide, a legend whose entries are
// wider than the panel it is given goes below, full width, rather than
// be cut; one that fits stays.
func TestWideLegendMovesBelow(t *testing.T) {
	a, b, c, d := plot.New(), plot.New(), plot.New(), plot.New()
	for _, p := range []*plot.Plot{a, b, c, d} {
		style(p)
	}
	a.Legend.Add("h3://127.0.0.5:8443/dns-query?a-long-path")
	lp := LegendPanel(a)
	defer legendPanels.Delete(lp)
	panels := [][]*plot.Plot{{a, b, c, lp}, {d, nil, nil, nil}}
	two := layout(panels, 12*vg.Inch, 6*vg.Inch, sizes[0])
	require.Equal(t, []*plot.Plot{lp}, two.legends)
	require.Greater(t, float64(two.strip), 0.0)

	b.Legend.Add("DoQ")
	short := LegendPanel(b)
	defer legendPanels.Delete(short)
	fits := layout([][]*plot.Plot{{c, d, short}}, 12*vg.Inch, 3*vg.Inch, sizes[0])
	require.Empty(t, fits.legends)
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

// TestSlowFigureIsLeftOut: a figure not drawn within DrawTimeout is left
// out of the page with a note, its data kept, and the report goes on.
func TestSlowFigureIsLeftOut(t *testing.T) {
	defer func(d time.Duration) { DrawTimeout = d }(DrawTimeout)
	DrawTimeout = time.Nanosecond
	p, data, err := CDF([]*Series{{Label: "a", Values: []float64{1, 2, 3}}}, "t", "x", false)
	require.NoError(t, err)
	// The abandoned drawing goes on writing: not in a directory the test
	// framework must remove cleanly.
	dir, err := os.MkdirTemp("", "doxlab-slow-figure")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	set := &Set{Dir: dir}
	require.NoError(t, set.Add(p, "slow", "slow", "of", CDFWidth, CDFHeight, data))
	require.Len(t, set.Figures, 1)
	require.Empty(t, set.Figures[0].SVG)
	require.Contains(t, set.Figures[0].Of, "Not drawn: it took longer than 1ns; its data is in slow.csv")
	_, err = os.Stat(filepath.Join(set.Dir, "slow.csv"))
	require.NoError(t, err)
}

// TestValuesNoAxisSpans: ±1e308 (their difference overflows) gives a
// panel that says so instead of a rasterizer that never ends; an
// infinity is not a value.
func TestValuesNoAxisSpans(t *testing.T) {
	p, data, err := CDF([]*Series{{Label: "a", Values: []float64{1e308, -1e308, math.Inf(1)}}}, "t", "x", true)
	require.NoError(t, err)
	require.Contains(t, p.Title.Text, "too far apart to draw")
	require.Len(t, data.Rows, 2)
	set := &Set{Dir: t.TempDir()}
	require.NoError(t, set.Add(p, "huge", "huge", "of", CDFWidth, CDFHeight, data))
}

// TestPDFBandsAreTheirColour: vgpdf reads a colour's RGBA as straight
// channels with their alpha; the PDF canvas hands it a band's colour so,
// not premultiplied (which drew the bands dark grey).
func TestPDFBandsAreTheirColour(t *testing.T) {
	band := color.NRGBA{0x00, 0x72, 0xb2, 0x30}
	r, g, b, a := straight(band).RGBA()
	if r>>8 != 0x00 || g>>8 != 0x72 || b>>8 != 0xb2 || a>>8 != 0x30 {
		t.Errorf("straight %v: %x %x %x %x", band, r>>8, g>>8, b>>8, a>>8)
	}
	pr, pg, pb, _ := band.RGBA() // premultiplied: what vgpdf got before
	if pg>>8 == 0x72 || pb>>8 == 0xb2 || pr>>8 != 0 {
		t.Errorf("premultiplied %v is not darker: %x %x %x", band, pr>>8, pg>>8, pb>>8)
	}
}

// TestParallelSetKeepsItsOrder: a parallel set draws its figures in the
// background and, after Wait, holds them in the order added, each the
// SVG a set drawing one at a time gives; a figure that cannot be
// written is Wait's error, not lost.
func TestParallelSetKeepsItsOrder(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	add := func(set *Set) {
		for i, name := range names {
			p, d, err := CDF([]*Series{{Label: name, Values: []float64{1, 2, float64(3 + i)}}}, "figure "+name, "x", false)
			require.NoError(t, err)
			require.NoError(t, set.Add(p, name, "heading "+name, "", CDFWidth, CDFHeight, d))
		}
	}
	one := &Set{Dir: t.TempDir()}
	add(one)
	par := &Set{Dir: t.TempDir(), Parallel: true}
	add(par)
	require.NoError(t, par.Wait())
	require.Len(t, par.Figures, len(names))
	for i, f := range par.Figures {
		require.Equal(t, names[i], f.Name)
		require.NotEmpty(t, f.SVG, f.Name)
		require.Equal(t, one.Figures[i], f, "drawn alike: %s", f.Name)
	}
	require.Equal(t, len(one.Files()), len(par.Files()))

	// A directory that goes away under the drawing: the PNG cannot be
	// written, and Wait says so.
	dir := t.TempDir()
	bad := &Set{Dir: dir, Parallel: true}
	p, d, err := CDF([]*Series{{Label: "a", Values: []float64{1, 2}}}, "t", "x", false)
	require.NoError(t, err)
	for range cap(drawSlots) { // hold the drawing until the directory is gone
		drawSlots <- struct{}{}
	}
	require.NoError(t, bad.Add(p, "gone", "gone", "", CDFWidth, CDFHeight, d))
	require.NoError(t, os.RemoveAll(dir))
	for range cap(drawSlots) {
		<-drawSlots
	}
	require.ErrorContains(t, bad.Wait(), "gone")
}

// TestValuesDrawnAsADist: a line of values is drawn as a Dist of them
// is: from at most MaxCDFPoints order statistics, the smallest and the
// largest among them, its band as wide as its whole sample's; a line of
// fewer from every value.
func TestValuesDrawnAsADist(t *testing.T) {
	var many, few []float64
	d := stats.NewDist()
	for i := range 3 * MaxCDFPoints / 2 { // more than a line draws, fewer than a Dist keeps exact
		v := float64((i * 7919) % 20011)
		many = append(many, v)
		d.Add(v)
	}
	few = slices.Clone(many[:100])
	_, data, err := CDF([]*Series{{Label: "values", Values: slices.Clone(many)}, {Label: "dist", Dist: d}, {Label: "few", Values: few}}, "t", "x", false)
	require.NoError(t, err)
	rows := map[string][][]string{}
	for _, r := range data.Rows {
		rows[r[0]] = append(rows[r[0]], r)
	}
	require.Len(t, rows["values"], MaxCDFPoints)
	require.Len(t, rows["few"], 100)
	for i, r := range rows["values"] {
		require.Equal(t, rows["dist"][i][1:], r[1:], "the Dist's points, to the digit")
	}
	sorted := stats.Sorted(many)
	require.Equal(t, fmt.Sprint(sorted[0]), rows["values"][0][1])
	require.Equal(t, fmt.Sprint(sorted[len(sorted)-1]), rows["values"][MaxCDFPoints-1][1])
	require.Equal(t, "1", rows["values"][MaxCDFPoints-1][2])
}

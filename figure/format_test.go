package figure

import (
	"html/template"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFormatsSayNoData: the report's formats print "–" where there is no
// data, never NaN or a signed zero; a change keeps its sign, a share is
// whole percent; a transport reads as the papers name it.
func TestFormatsSayNoData(t *testing.T) {
	require.Equal(t, "–", Pct(math.NaN()))
	require.Equal(t, "+12.3%", Pct(12.34))
	require.Equal(t, "-4.0%", Pct(-4))
	require.Equal(t, "0.0%", Pct(0.04), "no +0.0 %")
	require.Equal(t, "–", Share(math.NaN()))
	require.Equal(t, "38%", Share(0.375))
	require.Equal(t, "DoUDP", Label("udp"))
	require.Equal(t, "DoH", Label("doh2"))
	require.Equal(t, "DNS stream", Label("dnsstream"))
	require.Equal(t, "carrier-pigeon", Label("carrier-pigeon"), "an unknown one as it is")

	var b strings.Builder
	tmpl := template.Must(template.New("t").Funcs(Funcs).Parse(`{{pct .}}|{{share .}}|{{f .}}|{{ms .}}`))
	require.NoError(t, tmpl.Execute(&b, math.NaN()))
	require.Equal(t, "–|–|–|–", b.String())
}

// TestHeatMapScale: the colour scale spans the largest change either
// way (so zero is white), NaN cells are labelled "–" and kept in the
// data, and a grid without a value still draws (scale 1).
func TestHeatMapScale(t *testing.T) {
	z := map[string]float64{"a/x": -30, "b/x": 12, "a/y": math.NaN(), "b/y": 5}
	at := func(c, r string) float64 { return z[c+"/"+r] }
	require.Equal(t, 30.0, Extent([]string{"a", "b"}, []string{"x", "y"}, at))
	require.Zero(t, Extent([]string{"a"}, []string{"y"}, at), "nothing but NaN")
	_, w, h, data, err := HeatMap([]string{"a", "b"}, []string{"x", "y"}, at, 0, "t", "col", "row")
	require.NoError(t, err)
	require.Len(t, data.Rows, 4, "every cell in the data")
	require.Greater(t, float64(w), 0.0)
	require.Greater(t, float64(h), 0.0)
	_, _, _, _, err = HeatMap([]string{"a"}, []string{"y"}, at, 0, "t", "col", "row")
	require.NoError(t, err, "a grid of NaN draws")
	ticks := Names([]string{"p", "q"})
	require.Equal(t, "q", ticks[1].Label)
	require.Equal(t, 1.0, ticks[1].Value)
}

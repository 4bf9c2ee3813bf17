package pages

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/figure"
)

// TestFiguresPerVariant: each variant (DNS mode, stub state, setup) gets
// the paper's four figures under its own tag; Fig. 8 is one heat map per
// combination but the baseline, over profile × page, its data each
// combination's median increase where it has loads, and nothing where
// it has none; a variant of the baseline alone has no Fig. 8.
func TestFiguresPerVariant(t *testing.T) {
	cell := func(setup, profile, page, tr, h3 string, rel float64, ok int) Cell {
		c := Cell{DNSMode: "stub", StubState: "cold", Setup: setup, Profile: profile, Page: page, Transport: tr, H3: h3, OK: ok, RelPLT: rel}
		if ok > 0 {
			c.RelPLTs, c.PLTs = []float64{rel - 1, rel, rel + 1}, []float64{100, 110, 120}
		}
		return c
	}
	var cells []Cell
	for _, p := range []string{"fiber", "4g"} {
		for _, g := range []string{"wiki", "insta"} {
			cells = append(cells, cell("", p, g, "udp", "1rtt", 0, 5), cell("", p, g, "doq", "0rtt", -12, 5))
		}
	}
	cells[len(cells)-1] = cell("", "4g", "insta", "doq", "0rtt", 0, 0) // every load failed
	cells = append(cells, cell("cdn", "fiber", "wiki", "udp", "1rtt", 0, 5))
	dir := t.TempDir()
	set := &figure.Set{Dir: dir}
	require.NoError(t, Figures(cells, set))
	var names []string
	for _, f := range set.Figures {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"fig8-stub-cold", "fig9-stub-cold", "fig10-stub-cold", "fig12-stub-cold",
		"fig9-stub-cold-cdn", "fig10-stub-cold-cdn", "fig12-stub-cold-cdn"}, names)

	f, err := os.Open(filepath.Join(dir, "fig8-stub-cold.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"combination", "profile", "page", "median PLT increase (%)"}, rows[0])
	got := map[string]string{}
	for _, r := range rows[1:] {
		require.Equal(t, "DoQ + H3 0-RTT", r[0])
		got[r[1]+" "+r[2]] = r[3]
	}
	require.Equal(t, "-12", got["fiber wiki"])
	require.Equal(t, "-12", got["4g wiki"])
	require.Equal(t, "NaN", got["4g insta"], "no loads: no value (pandas and DuckDB read NaN as missing)")
}

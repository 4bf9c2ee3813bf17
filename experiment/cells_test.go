package experiment

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/stats"
)

// TestCellsInJSON: a cell's numbers are JSON numbers or null, never NaN
// (which encoding/json refuses); the interval is there only when the
// median has one; a comparison is added only where it has a p-value, and
// its significance only where binned values cannot reverse it.
func TestCellsInJSON(t *testing.T) {
	few := NewCell("t", map[string]string{"transport": "doq"}, "ms", 4, stats.Summarize([]float64{1, 2, 3}))
	require.Equal(t, 3, few.N)
	require.Equal(t, 4, few.Samples, "failed samples count in the cell")
	require.Equal(t, 2.0, *few.Median)
	require.Nil(t, few.CILo, "three values bound no 95 % interval")
	require.Nil(t, few.CILevel)

	var many []float64
	for i := range 20 {
		many = append(many, float64(i))
	}
	c := NewCell("t", nil, "ms", 20, stats.Summarize(many))
	require.NotNil(t, c.CILo)
	require.LessOrEqual(t, *c.CILo, *c.Median)
	require.GreaterOrEqual(t, *c.CIHi, *c.Median)
	require.InDelta(t, 0.95, *c.CILevel, 0.05)

	empty := NewCell("t", nil, "ms", 2, stats.Summarize(nil))
	b, err := json.Marshal(empty)
	require.NoError(t, err, "NaN statistics are null")
	require.Contains(t, string(b), `"median":null`)
	require.Nil(t, Num(math.Inf(1)))

	// No comparison without a p-value (an empty side).
	require.Equal(t, c, c.Versus("udp", stats.Compare(nil, many)))
	vs := c.Versus("udp", stats.Compare(many, append([]float64(nil), many[10:]...)))
	require.Equal(t, "udp", vs.Baseline)
	require.NotNil(t, vs.Significant)
	require.True(t, *vs.Significant)
	require.Greater(t, *vs.Delta, 0.0)

	undecided := stats.Comparison{P: 0.04, PLo: 0.01, PHi: 0.2, Approx: true, Delta: 0.1}
	require.True(t, undecided.Undecided())
	vs = c.Versus("udp", undecided)
	require.Nil(t, vs.Significant, "binned values that cannot tell are no verdict")
	require.True(t, vs.Approx)
}

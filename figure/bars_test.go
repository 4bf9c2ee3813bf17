package figure

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
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

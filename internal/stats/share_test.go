package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestShareIsWilsons: the interval is Wilson's, to seven places of
// scipy's binomtest(k, n).proportion_ci(method="wilson") (R's and
// statsmodels' "wilson" alike); at the edges it stays in [0, 1].
func TestShareIsWilsons(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{5, 10, 0.2365931, 0.7634069},
		{0, 10, 0, 0.2775328},
		{10, 10, 0.7224672, 1},
		{1, 40, 0.0044268, 0.1288137},
		{37, 120, 0.2327274, 0.3958300},
	} {
		s := NewShare(c.k, c.n)
		require.InDelta(t, float64(c.k)/float64(c.n), s.P, 1e-12)
		require.InDelta(t, c.lo, s.Lo, 1e-6, "%d of %d", c.k, c.n)
		require.InDelta(t, c.hi, s.Hi, 1e-6, "%d of %d", c.k, c.n)
	}
	require.True(t, math.IsNaN(NewShare(0, 0).P))
	require.Equal(t, "none of 0", NewShare(0, 0).String())
	require.Equal(t, "1 of 40, 2.5 % (95 % CI 0.4–12.9 %)", NewShare(1, 40).String())
	require.Equal(t, "–", NewShare(0, 0).Percent())
}

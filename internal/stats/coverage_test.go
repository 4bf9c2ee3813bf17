package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIntervalsHoldTheirLevel: the interval a quantile prints is a
// confidence interval of the level it says: over many samples of a
// known distribution (exponential, whose q-quantile is -ln(1-q)), the
// share whose interval holds the true quantile is the stated level,
// within three standard errors, for the median and the tail quantiles
// the findings check, small samples and large. And a sample too small
// to reach 95 % on a side says so with an infinite bound there.
func TestIntervalsHoldTheirLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	const trials = 2000
	for _, q := range []float64{0.5, 0.4, 0.8, 0.95} {
		truth := -math.Log(1 - q)
		for _, n := range []int{12, 40, 200} {
			t.Run(fmt.Sprintf("p%.0f n=%d", 100*q, n), func(t *testing.T) {
				held, bounded := 0, true
				var level float64
				for range trials {
					v := make([]float64, n)
					for i := range v {
						v[i] = rng.ExpFloat64()
					}
					slices.Sort(v)
					e := EstimateQuantile(v, q)
					level, bounded = e.Level, bounded && e.Bounded()
					require.GreaterOrEqual(t, e.Level, Confidence)
					require.LessOrEqual(t, e.Lo, e.Value)
					require.GreaterOrEqual(t, e.Hi, e.Value)
					if e.Lo <= truth && truth <= e.Hi {
						held++
					}
				}
				share := float64(held) / trials
				se := math.Sqrt(level * (1 - level) / trials)
				if !bounded { // one side open: it holds at least as often
					require.GreaterOrEqual(t, share, level-3*se, "held %d of %d", held, trials)
					return
				}
				require.InDelta(t, level, share, 3*se+1e-9, "held %d of %d at a stated %.4f", held, trials, level)
			})
		}
	}
	// Twelve samples cannot bound a p95 above: the largest is no bound.
	v := make([]float64, 12)
	for i := range v {
		v[i] = float64(i)
	}
	e := EstimateQuantile(v, 0.95)
	require.True(t, math.IsInf(e.Hi, 1), "%+v", e)
	require.Equal(t, "10.4 [±∞]", e.SignedCell(1)[1:], "printed as unbounded")
}

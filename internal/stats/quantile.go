package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// QuantileEstimate is a q-quantile of a sample with its distribution-free
// confidence interval: what a CDF's p40 or p80 claim is checked with.
type QuantileEstimate struct {
	Q     float64 `json:"q"`
	N     int     `json:"n"`
	Value float64 `json:"value"` // type 7, as Quantile
	// Lo and Hi bound the quantile at Level (at least Confidence): order
	// statistics X(l) and X(u) with P(l ≤ B < u) ≥ Confidence, B the
	// number of values below the true quantile, binomial(n, q): the
	// interval benchstat's median interval is the q = 0.5 case of. ±Inf
	// when the sample is too small to reach Confidence.
	Lo, Hi float64
	Level  float64
}

// EstimateQuantile is the q-quantile of sorted values with its interval.
func EstimateQuantile(sorted []float64, q float64) QuantileEstimate {
	n := len(sorted)
	e := QuantileEstimate{Q: q, N: n, Value: Quantile(sorted, q), Lo: math.Inf(-1), Hi: math.Inf(1), Level: math.NaN()}
	if n == 0 {
		e.Lo, e.Hi = math.NaN(), math.NaN()
		return e
	}
	b := distuv.Binomial{N: float64(n), P: q}
	// The narrowest interval of order statistics (1-based l < u) around
	// the quantile's rank whose coverage P(l ≤ B ≤ u-1) reaches the level,
	// widened one side at a time, the side that adds more coverage first.
	center := int(math.Round(q * float64(n)))
	l, u := max(center, 1), min(center+1, n)
	cover := func(l, u int) float64 { return b.CDF(float64(u-1)) - b.CDF(float64(l-1)) }
	for cover(l, u) < Confidence {
		down, up := -1.0, -1.0
		if l > 1 {
			down = cover(l-1, u)
		}
		if u < n {
			up = cover(l, u+1)
		}
		switch {
		case down < 0 && up < 0:
			return e // the whole sample is not enough
		case down >= up:
			l--
		default:
			u++
		}
	}
	e.Lo, e.Hi, e.Level = sorted[l-1], sorted[u-1], cover(l, u)
	return e
}

// Bounded is whether the interval is finite.
func (e QuantileEstimate) Bounded() bool {
	return e.N > 0 && !math.IsInf(e.Lo, 0) && !math.IsInf(e.Hi, 0)
}

package stats

import (
	"math"

	mstats "github.com/aclements/go-moremath/stats"
)

// QuantileEstimate is a q-quantile of a sample with its distribution-free
// confidence interval: what a CDF's p40 or p80 claim is checked with.
type QuantileEstimate struct {
	Q     float64 `json:"q"`
	N     int     `json:"n"`
	Value float64 `json:"value"` // type 7, as Quantile
	// Lo and Hi bound the quantile at Level (at least Confidence): the
	// order statistics go-moremath's QuantileCI picks, the procedure
	// benchmath's median interval is the q = 0.5 case of, so that
	// EstimateQuantile(s, 0.5) is Summarize's median interval exactly.
	// ±Inf when the sample is too small to reach Confidence.
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
	// An order statistic past the sample is an infinite bound: the
	// sample is too small for that side.
	ci := mstats.QuantileCI(n, q, Confidence)
	if ci.LoOrder >= 1 {
		e.Lo = sorted[ci.LoOrder-1]
	}
	if ci.HiOrder <= n {
		e.Hi = sorted[ci.HiOrder-1]
	}
	e.Level = ci.Confidence
	return e
}

// Bounded is whether the interval is finite.
func (e QuantileEstimate) Bounded() bool {
	return e.N > 0 && !math.IsInf(e.Lo, 0) && !math.IsInf(e.Hi, 0)
}

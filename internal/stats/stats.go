// Package stats is doxlab's one statistics layer: every median, quantile,
// interval and comparison that a table, figure, finding or summary
// prints comes from here, so they all mean the same thing and agree with
// the tools a researcher checks them with.
//
// Definitions:
//   - Quantiles interpolate linearly between order statistics
//     (Hyndman and Fan's type 7), the default of numpy's percentile,
//     pandas, R and DuckDB's quantile_cont: the median of {a, b} is
//     (a+b)/2. gonum's stat.Quantile offers types 1 and 4 only, so the
//     three lines are here.
//   - A median's 95 % confidence interval is the distribution-free one
//     from order statistics (the binomial interval), as benchstat gives
//     it (golang.org/x/perf/benchmath, AssumeNothing). Below 6 values
//     it cannot reach 95 % and is unbounded: the interval then prints as
//     "±∞", never as a guess.
//   - Two samples are compared the way benchstat compares them: a
//     two-sided Mann-Whitney U test, the difference of the medians
//     printed only when p < 0.05 and "~" otherwise.
//   - No data is NaN, never 0.
package stats

import (
	"math"
	"slices"
	"time"

	"golang.org/x/perf/benchmath"
	"gonum.org/v1/gonum/stat"
)

// Confidence is the level of every interval doxlab prints.
const Confidence = 0.95

// Alpha is the significance level of every comparison: a difference with
// p ≥ Alpha prints as "~".
const Alpha = 0.05

// Quantile is the q-quantile (0 ≤ q ≤ 1) of sorted values by linear
// interpolation (type 7). NaN for none.
func Quantile(sorted []float64, q float64) float64 { return quantile(sorted, q) }

// DurationQuantile is Quantile of sorted durations, to the nanosecond; 0
// for none (a duration has no NaN: check the length where none matters).
func DurationQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return time.Duration(math.Round(quantile(sorted, q)))
}

func quantile[T ~float64 | ~int64](sorted []T, q float64) float64 {
	n := len(sorted)
	if n == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	h := q * float64(n-1)
	i := int(math.Floor(h))
	if i >= n-1 {
		return float64(sorted[n-1])
	}
	if i < 0 {
		return float64(sorted[0])
	}
	return float64(sorted[i]) + (h-float64(i))*float64(sorted[i+1]-sorted[i])
}

// Median is the median of v (in any order; v is not changed). NaN for
// none.
func Median(v []float64) float64 {
	return Quantile(Sorted(v), 0.5)
}

// IQR is the interquartile range of sorted values. NaN for none.
func IQR(sorted []float64) float64 { return Quantile(sorted, 0.75) - Quantile(sorted, 0.25) }

// Mean is the arithmetic mean. NaN for none.
func Mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return stat.Mean(v, nil)
}

// Sorted is a sorted copy of v without its NaNs.
func Sorted(v []float64) []float64 {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	slices.Sort(s)
	return s
}

// Summary is a sample's center and spread: what a table cell prints.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	// Lo and Hi bound the median's confidence interval at Level (at
	// least Confidence); ±Inf when the sample is too small for one.
	Lo    float64 `json:"ci_lo"`
	Hi    float64 `json:"ci_hi"`
	Level float64 `json:"ci_level"`
	P25   float64 `json:"p25"`
	P75   float64 `json:"p75"`
	P95   float64 `json:"p95"`
}

// Summarize is v's summary (v in any order, NaNs dropped). A summary of
// nothing has N 0 and NaN everywhere else.
func Summarize(v []float64) Summary { return summarizeSorted(Sorted(v)) }

// summarizeSorted is the summary of sorted values without NaNs.
func summarizeSorted(s []float64) Summary {
	if len(s) == 0 {
		nan := math.NaN()
		return Summary{Median: nan, Lo: nan, Hi: nan, Level: nan, P25: nan, P75: nan, P95: nan}
	}
	ci := benchmath.AssumeNothing.Summary(&benchmath.Sample{Values: s, Thresholds: &benchmath.DefaultThresholds}, Confidence)
	return Summary{
		N: len(s), Median: Quantile(s, 0.5), Lo: ci.Lo, Hi: ci.Hi, Level: ci.Confidence,
		P25: Quantile(s, 0.25), P75: Quantile(s, 0.75), P95: Quantile(s, 0.95),
	}
}

// Scale is the summary of the sample multiplied by k > 0 (ms to RTTs):
// order statistics, and so the interval, scale with it.
func (s Summary) Scale(k float64) Summary {
	s.Median, s.Lo, s.Hi, s.P25, s.P75, s.P95 = k*s.Median, k*s.Lo, k*s.Hi, k*s.P25, k*s.P75, k*s.P95
	return s
}

// IQR is the summary's interquartile range.
func (s Summary) IQR() float64 { return s.P75 - s.P25 }

// Bounded is whether the interval is finite.
func (s Summary) Bounded() bool { return s.N > 0 && !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) }

// Comparison is a sample compared with a baseline, benchstat's way.
type Comparison struct {
	Base, Other Summary
	// P is the two-sided Mann-Whitney U test's p-value that both come
	// from one distribution; NaN when either is empty.
	P float64 `json:"p"`
	// Delta is the relative change of the medians, Other/Base - 1; NaN
	// when either is empty or the base's median is 0.
	Delta float64 `json:"delta"`
	// Approx is set when P comes from values binned to 0.1 % (a cell
	// past ExactLimit): the exact test's p is within [PLo, PHi], the
	// range every order of the values that share a bin allows.
	Approx   bool    `json:"approx,omitempty"`
	PLo, PHi float64 `json:"-"`
}

// Compare compares other with base.
func Compare(base, other []float64) Comparison { return compareSorted(Sorted(base), Sorted(other)) }

// compareSorted is Compare of sorted values without NaNs.
func compareSorted(b, o []float64) Comparison {
	c := Comparison{Base: summarizeSorted(b), Other: summarizeSorted(o), P: math.NaN(), Delta: math.NaN()}
	if len(b) == 0 || len(o) == 0 {
		return c
	}
	c.P = MannWhitneyP(b, o)
	if c.Base.Median != 0 {
		c.Delta = c.Other.Median/c.Base.Median - 1
	}
	return c
}

// Significant is whether the difference is significant at Alpha, by
// the exact test's p: false too where binned values cannot tell
// (Undecided).
func (c Comparison) Significant() bool {
	if c.Approx {
		return c.PHi < Alpha
	}
	return c.P < Alpha
}

// Undecided says whether binned values leave the verdict open: the
// exact test's p may be on either side of Alpha. No verdict is printed
// then, rather than one the exact test could reverse.
func (c Comparison) Undecided() bool { return c.Approx && c.PLo < Alpha && c.PHi >= Alpha }

// MannWhitneyP is the two-sided p-value of the Mann-Whitney U test that x
// and y come from one distribution (benchmath's, exact for small samples
// and with ties handled); NaN when either is empty. It is the same
// whichever sample comes first: benchmath doubles the exact
// distribution's lower tail at the smaller of the two U statistics, but
// takes the distribution of the first sample's U, which ties make
// asymmetric, so with ties its p is right only when the first sample's
// U is the smaller (one value against six, one tied: 2/7 one way, 4/7
// the other, which is the lower tail doubled). The samples are put in
// that order.
func MannWhitneyP(x, y []float64) float64 {
	a, b := Sorted(x), Sorted(y)
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	if u := uStatistic(a, b); u > float64(len(a)*len(b))-u {
		a, b = b, a
	}
	c := benchmath.AssumeNothing.Compare(
		&benchmath.Sample{Values: a, Thresholds: &benchmath.DefaultThresholds},
		&benchmath.Sample{Values: b, Thresholds: &benchmath.DefaultThresholds})
	return clampP(c.P)
}

// uStatistic is sorted a's Mann-Whitney U against sorted b, as
// benchmath's U1: the pairs where a's value is above b's, ties counting
// half.
func uStatistic(a, b []float64) float64 {
	u, lo, hi := 0.0, 0, 0 // b[:lo] below x, b[lo:hi] equal to it
	for _, x := range a {
		for lo < len(b) && b[lo] < x {
			lo++
		}
		for hi = max(hi, lo); hi < len(b) && b[hi] == x; hi++ {
		}
		u += float64(lo) + float64(hi-lo)/2
	}
	return u
}

// clampP is a p-value within [0, 1]: rounding puts a normal
// approximation's 2·Φ(z) a hair past 1 (1.0000000000000002).
func clampP(p float64) float64 {
	if math.IsNaN(p) {
		return p
	}
	return min(max(p, 0), 1)
}

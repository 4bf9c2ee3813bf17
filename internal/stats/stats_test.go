package stats

import (
	"encoding/json"
	"math"
	"math/bits"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestQuantileInterpolatesLikeNumpy(t *testing.T) {
	s := []float64{10, 20, 30, 40, 50}
	require.Equal(t, 10.0, Quantile(s, 0))
	require.Equal(t, 20.0, Quantile(s, 0.25))
	require.Equal(t, 30.0, Quantile(s, 0.5))
	require.Equal(t, 48.0, Quantile(s, 0.95))
	require.Equal(t, 50.0, Quantile(s, 1))
	require.Equal(t, 2.5, Median([]float64{4, 1}), "the median of two is their mean, not the larger")
	require.Equal(t, 3.144, Median([]float64{3.144, 3.144}))
	require.True(t, math.IsNaN(Median(nil)), "no data is NaN, never 0")
	require.True(t, math.IsNaN(Median([]float64{math.NaN()})))
	require.Equal(t, 30.0, Median([]float64{50, 10, 40, 30, 20}), "Median sorts a copy")
	require.Equal(t, 20.0, IQR(s))
}

// TestDurationQuantileToTheNanosecond: the link check's RTT errors are
// durations; their quantiles interpolate as Quantile does, rounded to
// the nanosecond (never truncated: 2.5 ns is 3), negative ones (a probe
// faster than configured) included, and none is 0.
func TestDurationQuantileToTheNanosecond(t *testing.T) {
	d := []time.Duration{-40 * time.Microsecond, 1, 4, 10 * time.Millisecond}
	require.Equal(t, time.Duration(3), DurationQuantile(d, 0.5), "2.5 ns rounds up")
	require.Equal(t, -40*time.Microsecond, DurationQuantile(d, 0))
	require.Equal(t, 10*time.Millisecond, DurationQuantile(d, 1))
	require.Equal(t, time.Duration(math.Round(Quantile([]float64{-40e3, 1, 4, 10e6}, 0.99))), DurationQuantile(d, 0.99))
	require.Equal(t, 9_700_000, int(DurationQuantile(d, 0.99)), "4 ns + 0.97 × (10 ms - 4 ns), rounded")
	require.Zero(t, DurationQuantile(nil, 0.5))
	long := []time.Duration{time.Hour, time.Hour + 2}
	require.Equal(t, time.Hour+1, DurationQuantile(long, 0.5), "an hour's values keep their nanoseconds")
}

func TestSummarizeGivesTheMediansInterval(t *testing.T) {
	// Too few values for a 95 % interval: unbounded, and printed so.
	small := Summarize([]float64{1, 2, 3})
	require.Equal(t, 3, small.N)
	require.False(t, small.Bounded())
	require.Equal(t, "2.00 [±∞] n=3", small.String())

	var v []float64
	for i := range 20 {
		v = append(v, float64(i))
	}
	s := Summarize(v)
	require.True(t, s.Bounded())
	require.Equal(t, 9.5, s.Median)
	require.Less(t, s.Lo, s.Median)
	require.Greater(t, s.Hi, s.Median)
	require.GreaterOrEqual(t, s.Level, Confidence)
	// The binomial interval of 20 values at 95 % runs from the 6th to
	// the 15th order statistic.
	require.Equal(t, 5.0, s.Lo)
	require.Equal(t, 14.0, s.Hi)

	none := Summarize(nil)
	require.Equal(t, 0, none.N)
	require.True(t, math.IsNaN(none.Median))
	require.Equal(t, "– n=0", none.String())
}

func TestCompareSaysTildeWhenNotSignificant(t *testing.T) {
	a := []float64{10, 11, 12, 13, 14, 15, 16, 17}
	b := []float64{20, 21, 22, 23, 24, 25, 26, 27}
	c := Compare(a, b)
	require.True(t, c.Significant())
	require.InDelta(t, 23.5/13.5-1, c.Delta, 1e-12)
	require.True(t, strings.HasPrefix(c.FormatDelta(), "+74.1 % (p="), c.FormatDelta())

	same := Compare(a, []float64{10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5, 17.5})
	require.False(t, same.Significant())
	require.True(t, strings.HasPrefix(same.FormatDelta(), "~ (p="), same.FormatDelta())

	// Two loads a cell can never be significant at 5 %.
	few := Compare([]float64{1, 2}, []float64{100, 200})
	require.False(t, few.Significant(), "p=%v", few.P)

	require.Equal(t, None, Compare(nil, b).FormatDelta())
}

func TestMannWhitneyExactValues(t *testing.T) {
	// Every x above every y: 1 of C(10,5)=252 orderings, twice.
	require.InDelta(t, 2.0/252, MannWhitneyP([]float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}), 1e-12)
	// 3 and 3 interleaved: P(U ≤ 3) = 7/20, twice.
	require.InDelta(t, 2*7.0/20, MannWhitneyP([]float64{1, 3, 5}, []float64{2, 4, 6}), 1e-12)
	require.True(t, math.IsNaN(MannWhitneyP(nil, []float64{1})))
}

// TestAgreesWithNumpy checks the quantiles against numpy's default
// percentile (linear, type 7), computed outside Go.
func TestAgreesWithNumpy(t *testing.T) {
	py := testutil.Need(t, "python3", "apt-get install python3")
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		testutil.Missing(t, "numpy not found; install it with: pip install numpy (or run bash .ci/run)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	qs := []float64{0, 0.05, 0.25, 0.4, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 1}
	var samples [][]float64
	for _, n := range []int{1, 2, 3, 4, 7, 10, 101, 1000} {
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Round(rng.ExpFloat64()*1e6) / 1e3 // ms with µs precision, skewed like latencies
		}
		samples = append(samples, v)
	}
	in, err := json.Marshal(map[string]any{"samples": samples, "qs": qs})
	require.NoError(t, err)
	cmd := exec.Command(py, "-c", `import json, sys, numpy as np
d = json.load(sys.stdin)
json.dump([[float(np.percentile(s, 100*q)) for q in d["qs"]] + [float(np.median(s))] for s in d["samples"]], sys.stdout)`)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	require.NoError(t, err)
	var want [][]float64
	require.NoError(t, json.Unmarshal(out, &want))
	for i, s := range samples {
		sorted := Sorted(s)
		for j, q := range qs {
			require.InDelta(t, want[i][j], Quantile(sorted, q), 1e-9, "n=%d q=%v", len(s), q)
		}
		require.InDelta(t, want[i][len(qs)], Median(s), 1e-9, "median, n=%d", len(s))
	}
}

// TestMannWhitneyIsSymmetricWithTies: small samples with ties (values a
// twentieth apart) have the exact test's p whichever comes first, and it
// is the permutation test's, counted over every way of splitting the
// pooled values: twice the smaller tail of U beyond the observed, at
// most 1. benchmath's own p with ties was right in one order only (a
// value against six, one tied: 2/7 and 4/7).
func TestMannWhitneyIsSymmetricWithTies(t *testing.T) {
	x, y := []float64{3.65}, []float64{2.45, 0.7, 1.7, 3.65, 0.75, 0.6}
	require.InDelta(t, 4.0/7, MannWhitneyP(x, y), 1e-12)
	require.InDelta(t, 4.0/7, MannWhitneyP(y, x), 1e-12)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		n1, n2 := 1+rng.IntN(6), 1+rng.IntN(6)
		x, y := make([]float64, n1), make([]float64, n2)
		for i := range x {
			x[i] = float64(rng.IntN(8)) / 20
		}
		for i := range y {
			y[i] = float64(1+rng.IntN(8)) / 20
		}
		p, q := MannWhitneyP(x, y), MannWhitneyP(y, x)
		if math.IsNaN(p) { // every value equal: no test
			require.True(t, math.IsNaN(q))
			continue
		}
		require.Equal(t, p, q, "x %v, y %v", x, y)
		if u := uStatistic(Sorted(x), Sorted(y)); u != float64(n1*n2)-u { // benchmath says 1 at the centre
			require.InDelta(t, permutationP(x, y), p, 1e-9, "x %v, y %v", x, y)
		}
	}
}

// permutationP is the two-sided p of x's U over every split of the
// pooled values into n1 and n2: twice the smaller tail, at most 1.
func permutationP(x, y []float64) float64 {
	pool := append(slices.Clone(x), y...)
	n1 := len(x)
	u := uStatistic(Sorted(x), Sorted(y))
	var le, ge, all float64
	for mask := range 1 << len(pool) {
		if bits.OnesCount(uint(mask)) != n1 {
			continue
		}
		var a, b []float64
		for i, v := range pool {
			if mask&(1<<i) != 0 {
				a = append(a, v)
			} else {
				b = append(b, v)
			}
		}
		v := uStatistic(Sorted(a), Sorted(b))
		all++
		if v <= u+1e-9 {
			le++
		}
		if v >= u-1e-9 {
			ge++
		}
	}
	return min(1, 2*min(le, ge)/all)
}

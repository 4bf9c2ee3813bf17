package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrintedNumbers: how each number a table prints reads, for every
// case it can be in: no data, an interval the sample cannot bound, a
// bounded one; a comparison significant, not, undecided on binned
// values, or without data.
func TestPrintedNumbers(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct{ got, want string }{
		{F(math.NaN(), 1), None},
		{F(inf, 1), "∞"},
		{F(-inf, 1), "-∞"},
		{F(1.25, 1), "1.2"}, // to even, as strconv rounds
		{F(-0.04, 1), "-0.0"},
		{Summary{}.CI(1), None},
		{Summary{}.Cell(1), None},
		{Summary{}.String(), "– n=0"},
		{Summary{N: 3, Median: 2, Lo: -inf, Hi: inf}.CI(1), "[±∞]"},
		{Summary{N: 3, Median: 2, Lo: -inf, Hi: inf}.Cell(1), "2.0 [±∞]"},
		{Summary{N: 9, Median: 2, Lo: 1.5, Hi: 2.75}.Cell(1), "2.0 [1.5, 2.8]"},
		{Summary{N: 9, Median: 2, Lo: 1.5, Hi: 2.75}.String(), "2.00 [1.50, 2.75] n=9"},
	} {
		require.Equal(t, c.want, c.got)
	}

	base, other := Summary{N: 10, Median: 100}, Summary{N: 12, Median: 115.1}
	cmp := func(p float64) Comparison { return Comparison{Base: base, Other: other, P: p, Delta: 0.151} }
	require.Equal(t, "+15.1 % (p=0.008 n=10+12)", cmp(0.008).FormatDelta())
	require.Equal(t, "yes (p=0.008 n=10+12)", cmp(0.008).Apart())
	require.Equal(t, "~ (p=0.400 n=10+12)", cmp(0.4).FormatDelta())
	require.Equal(t, "~ (p=0.400 n=10+12)", cmp(0.4).Apart())
	require.Equal(t, "+15.1 % (p=<0.001 n=10+12)", cmp(1e-9).FormatDelta())
	require.Equal(t, None, cmp(math.NaN()).FormatDelta())
	require.Equal(t, None, cmp(math.NaN()).Apart())
	require.Equal(t, None, Comparison{Base: base, Other: other, P: 0.01, Delta: math.NaN()}.FormatDelta(), "a base median of 0 has no relative change")

	binned := Comparison{Base: base, Other: other, P: 0.049, Delta: 0.151, Approx: true, PLo: 0.047, PHi: 0.052}
	require.True(t, binned.Undecided())
	require.Equal(t, "? (p≈0.049 n=10+12, binned: too close to 0.05 to call)", binned.FormatDelta())
	require.Equal(t, "? (p≈0.049 n=10+12, binned: too close to 0.05 to call)", binned.Apart())
	binned.PHi = 0.0499
	require.Equal(t, "+15.1 % (p≈0.049 n=10+12)", binned.FormatDelta(), "every order of the binned values is significant")

	q := QuantileEstimate{Q: 0.5, N: 40, Value: -0.04, Lo: -2.5, Hi: 1.96}
	require.Equal(t, "0.0 [-2.5, +2.0]", q.SignedCell(1), "no sign on a change that rounds to none")
	require.Equal(t, None, QuantileEstimate{}.SignedCell(1))
}

// TestPrintedPKeepsItsSide: a p-value prints on the side of 0.05 it is
// on, so that the verdict beside it never reads against it.
func TestPrintedPKeepsItsSide(t *testing.T) {
	for p, want := range map[float64]string{
		0.0496:     "0.0496",
		0.04996:    "0.04996",
		0.0500:     "0.050",
		0.0504:     "0.050",
		0.0449:     "0.045",
		0.0005:     "<0.001",
		0.9999:     "1.000",
		math.NaN(): None,
	} {
		require.Equal(t, want, formatP(p), "%v", p)
	}
	c := Comparison{Base: Summary{N: 8, Median: 1}, Other: Summary{N: 8, Median: 2}, P: 0.0496, Delta: 1}
	require.Equal(t, "+100.0 % (p=0.0496 n=8+8)", c.FormatDelta())
}

package figure

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
)

func labels(lo, hi float64) []string {
	var out []string
	for _, t := range (DecadeTicks{}).Ticks(lo, hi) {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

// TestDecadeTicksLabelEveryDecade: every decade in range is labelled;
// a narrow axis gets 2 and 5 too, never a lone number.
func TestDecadeTicksLabelEveryDecade(t *testing.T) {
	require.Equal(t, []string{"0.01", "0.1", "1", "10", "100"}, labels(0.01, 150))
	require.Equal(t, []string{"0.5", "1", "2", "5"}, labels(0.4, 6), "within one decade")
	require.Equal(t, []string{"20", "50"}, labels(11, 90), "no power of ten in range")
	require.Empty(t, labels(0, 10), "no log axis through 0")
	require.Len(t, (DecadeTicks{}).Ticks(1, 100), 19, "1-9, 10-90 and 100: minor ticks between")
}

func TestPlainTicksReadShort(t *testing.T) {
	var got []string
	for _, tk := range (PlainTicks{}).Ticks(0, 5200) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	require.Equal(t, []string{"0", "2500", "5000"}, got)
}

// TestNiceTicksEnd: an axis whose span is below the floats' resolution
// at its values (timestamps in µs, 1.7e15, a quarter apart) once never
// got its ticks: the tick counter, a float, stopped counting, and the
// report hung. Each axis gets a few ticks, in order, each once.
func TestNiceTicksEnd(t *testing.T) {
	for _, c := range [][2]float64{{1e15, 1e15 + 0.25}, {1.7e15, 1.7e15 + 1}, {-1e16 - 2, -1e16}, {1e300, 1e300 * (1 + 1e-15)}, {0, 2.9}, {-3, 3}, {5e-324, 1e-323}} {
		done := make(chan []plot.Tick, 1)
		go func() { done <- niceTicks{n: 5}.Ticks(c[0], c[1]) }()
		select {
		case ticks := <-done:
			require.LessOrEqual(t, len(ticks), 5*5+6, "%v", c)
			for i := 1; i < len(ticks); i++ {
				require.Less(t, ticks[i-1].Value, ticks[i].Value, "%v: in order, each once", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the ticks of an axis from %v to %v never end", c[0], c[1])
		}
	}
	labelled := func(ticks []plot.Tick) (out []string) {
		for _, tk := range ticks {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	require.Equal(t, []string{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5"}, labelled(niceTicks{n: 6}.Ticks(0, 2.9)), "every half, as before")
}

// FuzzTicks: for any axis, each ticker ends with few ticks, finite, in
// order, each once and within the axis.
func FuzzTicks(f *testing.F) {
	for _, c := range [][2]float64{{0, 2.9}, {1e15, 1e15 + 0.25}, {5e-324, 1e-323}, {1e-300, 1e300}, {-5, 5}, {0.1, 1e4}} {
		f.Add(c[0], c[1], 5)
	}
	f.Fuzz(func(t *testing.T, lo, hi float64, n int) {
		n = n%40 + 1
		if n < 1 {
			n += 40
		}
		for name, tk := range map[string]plot.Ticker{"nice": niceTicks{n: n}, "decade": DecadeTicks{}, "plain": PlainTicks{}} {
			if name == "plain" && (math.IsInf(hi-lo, 0) || math.IsNaN(hi-lo) || !(hi > lo)) {
				continue // gonum's own, which its axes never ask for these
			}
			ticks := tk.Ticks(lo, hi)
			if len(ticks) > 10_000 {
				t.Fatalf("%s: %d ticks on an axis from %v to %v", name, len(ticks), lo, hi)
			}
			for i, x := range ticks {
				if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
					t.Fatalf("%s: tick %v on an axis from %v to %v", name, x.Value, lo, hi)
				}
				if i > 0 && name != "plain" && !(ticks[i-1].Value < x.Value) { // gonum's: majors, then minors
					t.Fatalf("%s: ticks %v then %v on an axis from %v to %v", name, ticks[i-1].Value, x.Value, lo, hi)
				}
			}
		}
	})
}

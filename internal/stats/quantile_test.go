package stats

import (
	"math"
	"testing"
)

func TestEstimateQuantile(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i + 1) // 1..100
	}
	e := EstimateQuantile(v, 0.4)
	if e.Value != 40.6 || e.N != 100 {
		t.Errorf("p40 of 1..100: %v (numpy: 40.6)", e.Value)
	}
	// The binomial(100, 0.4) interval: about 40 ± 1.96·4.9 ranks.
	if e.Lo < 29 || e.Lo > 33 || e.Hi < 48 || e.Hi > 52 || e.Level < Confidence {
		t.Errorf("p40 interval [%v, %v] at %v", e.Lo, e.Hi, e.Level)
	}
	// The median's interval is the one Summary prints (benchmath's), for
	// every size: one procedure.
	for n := 1; n <= 5000; n++ {
		w := make([]float64, n)
		for i := range w {
			w[i] = float64(i)
		}
		m, s := EstimateQuantile(w, 0.5), Summarize(w)
		if m.Lo != s.Lo || m.Hi != s.Hi || m.Level != s.Level {
			t.Fatalf("n=%d: median interval [%v, %v] at %v, Summary's [%v, %v] at %v", n, m.Lo, m.Hi, m.Level, s.Lo, s.Hi, s.Level)
		}
	}
	if small := EstimateQuantile([]float64{1, 2, 3}, 0.8); small.Bounded() || small.Value != 2.6 {
		t.Errorf("3 values cannot bound a p80 at 95 %%: %+v", small)
	}
	if got := EstimateQuantile([]float64{-0.2, 0.1, 0.3}, 0.5).SignedCell(0); got != "0 [±∞]" {
		t.Errorf("a change that rounds to none: %q", got)
	}
	if got := (QuantileEstimate{Q: 0.4, N: 90, Value: 8.04, Lo: -3.1, Hi: 19.9}).SignedCell(1); got != "+8.0 [-3.1, +19.9]" {
		t.Errorf("signed cell %q", got)
	}
	if none := EstimateQuantile(nil, 0.5); !math.IsNaN(none.Value) || none.Bounded() {
		t.Errorf("no values: %+v", none)
	}
}

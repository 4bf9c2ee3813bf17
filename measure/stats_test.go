package measure

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMannWhitneyP(t *testing.T) {
	cases := []struct {
		name string
		x, y []float64
		want float64
	}{
		// Every x above every y: 1 of C(10,5)=252 orderings, twice.
		{"apart, 5 and 5", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, 2.0 / 252},
		{"apart, the other way", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 2.0 / 252},
		// 3 and 3 interleaved: U = 3 of 9; the 20 orderings by U are
		// 1 1 2 3 3 3 3 2 1 1, so P(U ≤ 3) = 7/20.
		{"interleaved", []float64{1, 3, 5}, []float64{2, 4, 6}, 2 * 7.0 / 20},
		// U = 8 of 9 with 3 and 3: P(U ≥ 8) = 2 of 20 orderings.
		{"one crossing", []float64{3, 5, 6}, []float64{1, 2, 4}, 2 * 2.0 / 20},
		{"empty", nil, []float64{1}, 1},
	}
	for _, c := range cases {
		if got := MannWhitneyP(c.x, c.y); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: p = %v, want %v", c.name, got, c.want)
		}
	}
	// The normal approximation beyond 400 pairs: 25 and 25 wholly apart.
	var x, y []float64
	for i := range 25 {
		x, y = append(x, float64(100+i)), append(y, float64(i))
	}
	if p := MannWhitneyP(x, y); p > 1e-6 {
		t.Errorf("25 and 25 apart: p = %v, want tiny", p)
	}
	if p := MannWhitneyP(x, x); p < 0.9 {
		t.Errorf("a sample against itself: p = %v, want about 1", p)
	}
}

func TestQuantile(t *testing.T) {
	s := []float64{10, 20, 30, 40, 50}
	require.Equal(t, 10.0, Quantile(s, 0))
	require.Equal(t, 20.0, Quantile(s, 0.25))
	require.Equal(t, 30.0, Quantile(s, 0.5))
	require.Equal(t, 40.0, Quantile(s, 0.75))
	require.Equal(t, 50.0, Quantile(s, 1), "the largest, not past the end")
	require.True(t, math.IsNaN(Quantile(nil, 0.5)))
	require.Equal(t, 30.0, Median([]float64{50, 10, 40, 30, 20}), "Median sorts first")
	require.Equal(t, 20.0, IQR(s))
}

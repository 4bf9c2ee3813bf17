package stats

import (
	"fmt"
	"math"
)

// Share is k of n with its 95 % Wilson score interval, which stays inside
// [0, 1] and is sound for k near 0 or n, where the normal one is not
// (Brown, Cai and DasGupta 2001; statsmodels' and R's method "wilson").
type Share struct {
	K, N      int
	P, Lo, Hi float64 // NaN when n is 0
}

// NewShare is k of n.
func NewShare(k, n int) Share {
	s := Share{K: k, N: n, P: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	if n <= 0 {
		return s
	}
	const z = 1.959963984540054 // the normal's 97.5th percentile
	p, fn := float64(k)/float64(n), float64(n)
	d := 1 + z*z/fn
	c := (p + z*z/(2*fn)) / d
	h := z * math.Sqrt(p*(1-p)/fn+z*z/(4*fn*fn)) / d
	s.P, s.Lo, s.Hi = p, max(0, c-h), min(1, c+h)
	return s
}

// String is "3 of 40, 7.5 % (95 % CI 2.6–19.9 %)"; "none of 0" for no n.
func (s Share) String() string {
	if s.N == 0 {
		return "none of 0"
	}
	return fmt.Sprintf("%d of %d, %s", s.K, s.N, s.Percent())
}

// Percent is "7.5 % (95 % CI 2.6–19.9 %)"; "–" for no n.
func (s Share) Percent() string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s %% (95 %% CI %s–%s %%)", F(100*s.P, 1), F(100*s.Lo, 1), F(100*s.Hi, 1))
}

package measure

import "math"

// Quantile is the q-quantile of sorted values: the value at index
// floor(q·n), with no interpolation, so it is always a value that was
// measured. NaN for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// IQR is the interquartile range of sorted values, by Quantile.
func IQR(sorted []float64) float64 { return Quantile(sorted, 0.75) - Quantile(sorted, 0.25) }

// MannWhitneyP is the two-sided p-value of the Mann-Whitney U test that
// x and y come from one distribution: small when one's values tend to
// lie above the other's. It makes no assumption about their shape, which
// suits load times with a round trip's worth of modes. Ties count half.
// Up to 400 pairs the p-value is exact (for samples without ties; with
// ties a close approximation); beyond, the normal approximation with a
// continuity correction. 1 when either sample is empty.
func MannWhitneyP(x, y []float64) float64 {
	n, m := len(x), len(y)
	if n == 0 || m == 0 {
		return 1
	}
	var u float64 // pairs with x above y
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	if n*m > 400 {
		mean := float64(n*m) / 2
		sd := math.Sqrt(float64(n*m*(n+m+1)) / 12)
		z := (math.Abs(u-mean) - 0.5) / sd
		return min(1, math.Erfc(max(z, 0)/math.Sqrt2))
	}
	ways := uDistribution(n, m)
	var total, below, above float64
	for k, w := range ways {
		total += w
		if float64(k) <= u {
			below += w
		}
		if float64(k) >= u {
			above += w
		}
	}
	return min(1, 2*min(below, above)/total)
}

// uDistribution counts the orderings of n x's and m y's by U, the number
// of (x, y) pairs with the x above: ways[u]. An ordering's largest value
// is an x (adding m to U, one x fewer) or a y (one y fewer).
func uDistribution(n, m int) []float64 {
	// f[i][j] is the distribution for i x's and j y's.
	f := make([][][]float64, n+1)
	for i := range f {
		f[i] = make([][]float64, m+1)
		for j := range f[i] {
			d := make([]float64, i*j+1)
			switch {
			case i == 0 || j == 0:
				d[0] = 1
			default:
				for k, w := range f[i-1][j] {
					d[k+j] += w
				}
				for k, w := range f[i][j-1] {
					d[k] += w
				}
			}
			f[i][j] = d
		}
	}
	return f[n][m]
}

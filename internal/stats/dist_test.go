package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/stretchr/testify/require"
)

// lognormal is a skewed sample like DNS timings, with ties (rounded to
// the microsecond).
func lognormal(r *rand.Rand, n int, mu float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Round(math.Exp(mu+0.6*r.NormFloat64())*1e3) / 1e3
	}
	return v
}

func distOf(v []float64, limit int) *Dist {
	d := &Dist{limit: limit}
	for _, x := range v {
		d.Add(x)
	}
	return d
}

func TestDistIsExactUpToItsLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 5, 6, 7, 30, 31, 500} {
		v := lognormal(r, n, 3)
		d := distOf(v, 0)
		if !d.Exact() {
			t.Fatalf("n=%d: folded below the limit", n)
		}
		if got, want := d.Summary(), Summarize(v); !sameSummary(got, want, 0) {
			t.Errorf("n=%d: %+v, want %+v", n, got, want)
		}
		w := lognormal(r, n+3, 3.1)
		if got, want := CompareDists(d, distOf(w, 0)), Compare(v, w); !same(got.P, want.P, 0) || !same(got.Delta, want.Delta, 0) {
			t.Errorf("n=%d: compare %+v, want %+v", n, got, want)
		}
	}
}

func TestFoldedDistIsWithinItsStatedError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{101, 1000, 20001} {
		v := lognormal(r, n, 3)
		d := distOf(v, 100)
		if d.Exact() {
			t.Fatalf("n=%d: not folded", n)
		}
		got, want := d.Summary(), Summarize(v)
		if !sameSummary(got, want, SketchAccuracy) {
			t.Errorf("n=%d: %+v, want %+v within %g", n, got, want, SketchAccuracy)
		}
		for _, q := range []float64{0, 0.5, 0.9, 0.999, 1} {
			if got, want := d.Quantile(q), Quantile(Sorted(v), q); !same(got, want, SketchAccuracy) {
				t.Errorf("n=%d: q%g %g, want %g", n, q, got, want)
			}
		}
		// The CDF's points lie on the sample's order statistics.
		sorted := Sorted(v)
		pts := d.CDF(50)
		if len(pts) != 50 || pts[len(pts)-1].P != 1 {
			t.Fatalf("n=%d: %d points, last %+v", n, len(pts), pts[len(pts)-1])
		}
		for _, p := range pts {
			rank := int(math.Round(p.P*float64(n))) - 1
			if !same(p.X, sorted[rank], SketchAccuracy) {
				t.Errorf("n=%d: point %+v, order statistic %g", n, p, sorted[rank])
			}
		}
	}
}

func TestMergedDistsAreTheirPool(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a, b := lognormal(r, 80, 3), lognormal(r, 90, 3.2)
	for _, limit := range []int{0, 100} { // exact, and folded by the merge
		d := distOf(a, limit)
		d.Merge(distOf(b, limit))
		if got, want := d.Summary(), Summarize(append(a, b...)); d.N() != 170 || !sameSummary(got, want, SketchAccuracy) {
			t.Errorf("limit %d: %+v, want %+v", limit, got, want)
		}
	}
}

// On values a sketch's bins hold exactly, the binned U test is
// benchmath's own: the same p, ties and all.
func TestBinnedUTestIsBenchmaths(t *testing.T) {
	m, err := mapping.NewLogarithmicMapping(SketchAccuracy)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	onBins := func(n int, mu float64) []float64 {
		v := lognormal(r, n, mu)
		for i := range v {
			v[i] = m.Value(m.Index(v[i]))
		}
		return v
	}
	for _, shift := range []float64{0, 0.01, 0.05} {
		a, b := onBins(3000, 3), onBins(2500, 3+shift)
		got := CompareDists(distOf(a, 100), distOf(b, 100))
		want := MannWhitneyP(a, b)
		if !same(got.P, want, 1e-9) {
			t.Errorf("shift %g: p %g, benchmath %g", shift, got.P, want)
		}
	}
	same := onBins(200, 3)
	if p := CompareDists(distOf([]float64{same[0], same[0]}, 1), distOf([]float64{same[0]}, 1)).P; p != 1 {
		t.Errorf("identical samples: p %g, want 1", p)
	}
}

func sameSummary(a, b Summary, rel float64) bool {
	return a.N == b.N && same(a.Median, b.Median, rel) && same(a.Lo, b.Lo, rel) && same(a.Hi, b.Hi, rel) &&
		same(a.Level, b.Level, 0) && same(a.P25, b.P25, rel) && same(a.P75, b.P75, rel) && same(a.P95, b.P95, rel)
}

func same(a, b, rel float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= rel*math.Abs(b)+1e-12
}

// BenchmarkDistAdd is the cost of a value in a report's one pass: the
// exact part, then the sketch.
func BenchmarkDistAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	v := lognormal(r, 1<<16, 3)
	d := NewDist()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d.Add(v[i&(1<<16-1)])
	}
}

// TestFoldedDistIsBoundedWhateverTheRange: values spanning ±1e±300 (a
// worker can write them) fold into at most MaxSketchBins bins a sign,
// where an unbounded sketch took ~700,000; the large magnitudes keep
// their accuracy, the quantiles stay in order, and infinities are not
// values.
func TestFoldedDistIsBoundedWhateverTheRange(t *testing.T) {
	d := NewDist()
	for i := range 20000 {
		sign := 1.0
		if i%2 == 1 {
			sign = -1
		}
		d.Add(sign * math.Pow(10, float64(i*7919%601-300)))
	}
	d.Add(math.Inf(1))
	d.Add(math.Inf(-1))
	if d.N() != 20000 {
		t.Fatalf("n = %d, want 20000 (infinities dropped)", d.N())
	}
	if b := len(d.bins()); b > 2*MaxSketchBins+1 {
		t.Fatalf("%d bins, more than %d", b, 2*MaxSketchBins+1)
	}
	s := d.Summary()
	if !(s.P25 <= s.Median && s.Median <= s.P75 && s.P75 <= s.P95) {
		t.Fatalf("quantiles out of order: %+v", s)
	}
	if top := d.Quantile(1); math.Abs(top-1e300)/1e300 > SketchAccuracy {
		t.Fatalf("max %g, want 1e300 within %g", top, SketchAccuracy)
	}
}

// TestBinnedComparisonsNeverReverseTheExactTest: past ExactLimit a
// comparison runs on values binned to 0.1 %. Its p is said to be
// approximate, the exact test's p is within its bounds, and where the
// bounds straddle Alpha no verdict is given: none is one the exact test
// would reverse. Shifts under 0.1 %, invisible to the bins, included.
func TestBinnedComparisonsNeverReverseTheExactTest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	undecided := 0
	for trial := range 60 {
		shift := 1 + float64(trial%20)*0.0002 // 0 to 0.38 %
		var a, b []float64
		da, db := NewDist(), NewDist()
		for range ExactLimit + 500 {
			x, y := 10*math.Exp(rng.NormFloat64()*0.05), 10*math.Exp(rng.NormFloat64()*0.05)*shift
			a, b = append(a, x), append(b, y)
			da.Add(x)
			db.Add(y)
		}
		c := CompareDists(da, db)
		exact := MannWhitneyP(a, b)
		require.True(t, c.Approx)
		require.GreaterOrEqual(t, exact, c.PLo-1e-12, "trial %d", trial)
		require.LessOrEqual(t, exact, c.PHi+1e-12, "trial %d", trial)
		require.True(t, c.P >= 0 && c.P <= 1)
		if c.Undecided() {
			undecided++
			require.False(t, c.Significant())
			require.Contains(t, c.FormatDelta(), "? (p≈")
			require.Contains(t, c.Test(), "too close to 0.05 to call")
			continue
		}
		require.Equal(t, exact < Alpha, c.Significant(), "trial %d: binned p %v [%v, %v], exact %v", trial, c.P, c.PLo, c.PHi, exact)
	}
	t.Logf("%d of 60 comparisons too close to call on binned values", undecided)
}

// A Dist encoded and decoded is the Dist: the same summary to the last
// bit, exact or folded, and merged it pools as the original does (a
// report merges each run's stored cells).
func TestDistEncodesWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 7, ExactLimit, ExactLimit + 1, 30000} {
		v := lognormal(r, n, 3)
		if n == 30000 {
			v[0], v[1] = -v[1], 0 // a sketch's negative and zero bins too
		}
		d := distOf(v, 0)
		b, err := d.MarshalBinary()
		require.NoError(t, err)
		var got Dist
		require.NoError(t, got.UnmarshalBinary(b), "n %d", n)
		require.Equal(t, d.N(), got.N(), "n %d", n)
		require.Equal(t, d.Exact(), got.Exact(), "n %d", n)
		if n > 0 {
			require.Equal(t, d.Summary(), got.Summary(), "n %d", n)
		}
		// Merged into a Dist that holds other values, as the original.
		other := lognormal(r, 300, 3.1)
		a, c := distOf(other, 0), distOf(other, 0)
		a.Merge(d)
		c.Merge(&got)
		require.Equal(t, a.N(), c.N())
		require.Equal(t, a.Summary(), c.Summary(), "n %d merged", n)
		// The decoded Dist goes on taking values.
		got.Add(5)
		require.Equal(t, n+1, got.N())
	}
}

// What is not an encoded Dist is refused, with no panic.
func TestDistRefusesBadEncodings(t *testing.T) {
	d := distOf([]float64{1, 2, 3}, 0)
	good, err := d.MarshalBinary()
	require.NoError(t, err)
	folded := distOf(lognormal(rand.New(rand.NewPCG(1, 1)), ExactLimit+1, 3), 0)
	sketch, err := folded.MarshalBinary()
	require.NoError(t, err)
	wrongCount := append([]byte{distFormat, 5}, sketch[3:]...) // the sketch's bins hold 4,097 values
	for name, b := range map[string][]byte{
		"empty": nil, "another version": {2, 0}, "count cut short": {distFormat, 0x80},
		"values cut short": good[:len(good)-1], "values but no kind": good[:2], "unknown kind": {distFormat, 1, 9},
		"sketch cut short": sketch[:len(sketch)/2], "sketch of another count": wrongCount,
		"more values than a Dist holds whole": append([]byte{distFormat, 0x81, 0x40, 0}, make([]byte, 8*(ExactLimit+1))...),
		// Found by FuzzDistUnmarshal: a NaN among the values made every
		// quantile NaN.
		"a NaN among the values": append(append([]byte{distFormat, 2, 0}, good[3:11]...), 0, 0, 0, 0, 0, 0, 0xf8, 0x7f),
		"an infinity":            append(append([]byte{distFormat, 2, 0}, good[3:11]...), 0, 0, 0, 0, 0, 0, 0xf0, 0x7f),
	} {
		var x Dist
		require.Error(t, x.UnmarshalBinary(b), name)
	}
}

// FuzzDistUnmarshal: whatever octets a store or a cache file holds as a
// cell's distribution, they are refused, or read into a Dist whose
// statistics are numbers in order, that encodes to what decodes the
// same, and that merges with a Dist of the reader's own.
func FuzzDistUnmarshal(f *testing.F) {
	exact, _ := distOf([]float64{1, 2, 3}, 0).MarshalBinary()
	sketch, _ := distOf(lognormal(rand.New(rand.NewPCG(1, 1)), ExactLimit+1, 3), 0).MarshalBinary()
	for _, b := range [][]byte{exact, sketch, {distFormat, 0}, {distFormat, 1, 9}, sketch[:len(sketch)/2]} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Dist
		if d.UnmarshalBinary(b) != nil {
			return
		}
		n := d.N()
		if n > 0 {
			lo, med, hi := d.Quantile(0), d.Quantile(0.5), d.Quantile(1)
			if !(lo <= med && med <= hi) {
				t.Fatalf("quantiles out of order: %v %v %v", lo, med, hi)
			}
			d.Summary()
			d.CDF(50)
		}
		again, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Dist
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("what it encodes does not decode: %v", err)
		}
		if back.N() != n {
			t.Fatalf("%d values decoded again as %d", n, back.N())
		}
		own := distOf([]float64{4, 5}, 0)
		own.Merge(&d)
		if own.N() != n+2 {
			t.Fatalf("merged %d and 2 into %d", n, own.N())
		}
	})
}

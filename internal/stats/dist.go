package stats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/DataDog/sketches-go/ddsketch"
	mstats "github.com/aclements/go-moremath/stats"
)

// A Dist is a sample read in one pass, in any order, from a store too
// large to hold in memory: the analysis of 10 million samples keeps one
// Dist per table cell and metric, never the samples.
//
// Up to ExactLimit values (4,096) it keeps them whole, and everything computed
// from it is exactly what Summarize and Compare give. Beyond that it
// folds them into a DDSketch (DataDog's sketches-go) of relative accuracy
// SketchAccuracy: each order statistic it gives is within 0.1 % of the
// true one, and so are the type-7 quantiles and the median's interval
// built from them (an interpolation of two values within 0.1 % is within
// 0.1 %). Its size depends on the range of the values (about 1,150 bins
// per decade), not on how many there are, and is bounded whatever the
// range: past MaxSketchBins bins (seven decades, microseconds to tens of
// seconds in ms) a sign's smallest magnitudes collapse into one bin, so
// values spanning ±1e±300 cost what seven decades do, and only the
// smallest of them lose their accuracy. Dists merge, so a table cell
// pooled over profiles or vantage points is the merge of its parts.
// Non-finite values are not values: NaN and ±Inf are dropped.
type Dist struct {
	vals   []float64          // whole, while sketch is nil; sorted when sorted is set
	sorted bool               // vals is in order
	sketch *ddsketch.DDSketch // the values, folded, beyond ExactLimit
	n      int
	limit  int  // ExactLimit, or smaller in tests
	memo   bool // sketch's bins are memo's (memo.go)
	// The last value added to the sketch that memo does not hold, and
	// its bin (none while lastV is 0, which is never such a value): see
	// sketchAdd.
	lastV   float64
	lastBin int
}

// ExactLimit is how many values a Dist keeps whole before it folds them
// into a sketch: a paper's cell (tens to a few thousand samples) is drawn
// from exact values. It bounds a report's memory too: every cell and
// metric holds at most this many values, or a sketch of at most
// 2 × MaxSketchBins bins, in each of the store's readers (60 cells × 9
// metrics × 2 readers × 4,096 × 8 octets is 35 MB).
const ExactLimit = 1 << 12

// SketchAccuracy is the relative accuracy of a folded Dist's order
// statistics.
const SketchAccuracy = 0.001

// MaxSketchBins bounds a folded Dist's bins for each sign: 8,192 bins of
// 0.1 % hold seven decades whole (64 KiB each).
const MaxSketchBins = 1 << 13

// NewDist is an empty Dist.
func NewDist() *Dist { return &Dist{limit: ExactLimit} }

// Add adds v; a NaN or an infinity is not a value and is dropped.
func (d *Dist) Add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	d.n++
	if d.sketch != nil {
		d.sketchAdd(v)
		return
	}
	d.vals, d.sorted = append(d.vals, v), false
	if len(d.vals) > d.exactLimit() {
		d.fold()
	}
}

func (d *Dist) exactLimit() int {
	if d.limit == 0 {
		return ExactLimit
	}
	return d.limit
}

// fold moves the whole values into the sketch.
func (d *Dist) fold() {
	s, err := ddsketch.LogCollapsingLowestDenseDDSketch(SketchAccuracy, MaxSketchBins)
	if err != nil {
		panic(err) // only for an accuracy outside (0, 1)
	}
	d.sketch, d.memo = s, memoFor(s)
	for _, v := range d.vals {
		d.sketchAdd(v)
	}
	d.vals = nil
}

// sketchAdd adds v to the sketch: to its bin in memo where memo holds
// it, as the sketch's Add would (a value of a whole number of
// thousandths is positive, so its bin is in the positive store).
func (d *Dist) sketchAdd(v float64) {
	if d.memo {
		if i, ok := memoIndex(v); ok {
			d.sketch.GetPositiveValueStore().Add(i)
			return
		}
	}
	// Otherwise the bin the sketch's Add finds for a positive value,
	// but for one the same as the last, whose bin is known: a cell's
	// serialization times repeat (its DNS messages are of a few sizes).
	m := d.sketch.IndexMapping
	if !(v > m.MinIndexableValue() && v <= m.MaxIndexableValue()) {
		d.sketch.Add(v)
		return
	}
	if v != d.lastV { // v > 0: never the zero lastV starts at
		d.lastV, d.lastBin = v, m.Index(v)
	}
	d.sketch.GetPositiveValueStore().Add(d.lastBin)
}

// Merge adds o's values to d.
func (d *Dist) Merge(o *Dist) {
	if o == nil || o.n == 0 {
		return
	}
	d.n += o.n
	switch {
	case d.sketch == nil && o.sketch == nil:
		d.vals, d.sorted = append(d.vals, o.vals...), false
		if len(d.vals) > d.exactLimit() {
			d.fold()
		}
		return
	case d.sketch == nil:
		d.fold()
	}
	if o.sketch != nil {
		d.sketch.MergeWith(o.sketch)
		return
	}
	for _, v := range o.vals {
		d.sketchAdd(v)
	}
}

// N is the number of values.
func (d *Dist) N() int {
	if d == nil {
		return 0
	}
	return d.n
}

// Exact is whether d holds its values whole.
func (d *Dist) Exact() bool { return d == nil || d.sketch == nil }

// Values are d's values in order, if d holds them whole.
func (d *Dist) Values() ([]float64, bool) {
	if d == nil {
		return nil, true
	}
	if d.sketch != nil {
		return nil, false
	}
	if !d.sorted {
		slices.Sort(d.vals)
		d.sorted = true
	}
	return d.vals, true
}

// bin is a value and how many of the sample sit there.
type bin struct{ v, count float64 }

// bins are a folded Dist's values as bins in order.
func (d *Dist) bins() []bin {
	var neg, pos []bin
	m := d.sketch.IndexMapping
	d.sketch.GetNegativeValueStore().ForEach(func(i int, c float64) bool {
		neg = append(neg, bin{-m.Value(i), c})
		return false
	})
	d.sketch.GetPositiveValueStore().ForEach(func(i int, c float64) bool {
		pos = append(pos, bin{m.Value(i), c})
		return false
	})
	slices.Reverse(neg) // the store orders them by magnitude
	if z := d.sketch.GetZeroCount(); z > 0 {
		neg = append(neg, bin{0, z})
	}
	return append(neg, pos...)
}

// orderStats are the values at 0-based ranks (ascending), read from the
// bins in one walk.
func orderStats(bins []bin, ranks []int) []float64 {
	out := make([]float64, len(ranks))
	seen, b := 0.0, 0
	for i, r := range ranks {
		for b < len(bins)-1 && float64(r) >= seen+bins[b].count {
			seen += bins[b].count
			b++
		}
		out[i] = bins[b].v
	}
	return out
}

// Summary is d's summary: Summarize of its values when exact.
func (d *Dist) Summary() Summary {
	if vals, ok := d.Values(); ok {
		return summarizeSorted(vals)
	}
	n := d.n
	ci := mstats.QuantileCI(n, 0.5, Confidence)
	qs := []float64{0.5, 0.25, 0.75, 0.95}
	var ranks []int
	for _, q := range qs {
		h := q * float64(n-1)
		ranks = append(ranks, int(math.Floor(h)), min(int(math.Floor(h))+1, n-1))
	}
	lo, hi := ci.LoOrder-1, ci.HiOrder-1 // the interval's order statistics, 0-based
	ranks = append(ranks, max(lo, 0), min(hi, n-1))
	sr := sortedRanks(ranks)
	v := orderStats(d.bins(), sr)
	at := func(r int) float64 { i, _ := slices.BinarySearch(sr, r); return v[i] }
	q := func(p float64) float64 {
		h := p * float64(n-1)
		i := int(math.Floor(h))
		if i >= n-1 {
			return at(n - 1)
		}
		return at(i) + (h-float64(i))*(at(i+1)-at(i))
	}
	s := Summary{N: n, Median: q(0.5), Lo: math.Inf(-1), Hi: math.Inf(1), Level: ci.Confidence, P25: q(0.25), P75: q(0.75), P95: q(0.95)}
	if lo >= 0 {
		s.Lo = at(lo)
	}
	if hi < n {
		s.Hi = at(hi)
	}
	return s
}

// Quantile is d's q-quantile (type 7): exactly Quantile's when d is
// exact, within 0.1 % when folded. NaN for none.
func (d *Dist) Quantile(q float64) float64 {
	if vals, ok := d.Values(); ok {
		return Quantile(vals, q)
	}
	n := d.n
	h := q * float64(n-1)
	i := min(max(int(math.Floor(h)), 0), n-1)
	v := orderStats(d.bins(), []int{i, min(i+1, n-1)})
	return v[0] + (h-float64(i))*(v[1]-v[0])
}

func sortedRanks(r []int) []int {
	s := slices.Clone(r)
	slices.Sort(s)
	return slices.Compact(s)
}

// Point is a point of an empirical CDF: the share P of the sample at or
// below X.
type Point struct{ X, P float64 }

// CDF is d's empirical CDF in at most max points (max ≥ 2): every value
// when d is exact and holds no more, else values at evenly spaced ranks
// (the first and the last among them), so a line of 10 million samples
// is drawn from as many points as one of a few thousand.
func (d *Dist) CDF(max int) []Point {
	n := d.N()
	if n == 0 {
		return nil
	}
	if vals, ok := d.Values(); ok {
		return SortedCDF(vals, max)
	}
	ranks := cdfRanks(n, max)
	v := orderStats(d.bins(), ranks)
	return cdfPoints(v, ranks, n)
}

// SortedCDF is the empirical CDF of sorted values, from at most max of
// their order statistics (every value up to max, then evenly spaced
// ranks, the first and the last among them): the line a figure draws.
func SortedCDF(sorted []float64, max int) []Point {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	if n <= max {
		out := make([]Point, n)
		for i, v := range sorted {
			out[i] = Point{v, float64(i+1) / float64(n)}
		}
		return out
	}
	ranks := cdfRanks(n, max)
	v := make([]float64, len(ranks))
	for i, r := range ranks {
		v[i] = sorted[r]
	}
	return cdfPoints(v, ranks, n)
}

// cdfRanks are max ranks of n evenly spaced, the first and the last.
func cdfRanks(n, max int) []int {
	k := min(max, n)
	ranks := make([]int, k)
	for i := range ranks {
		ranks[i] = int(math.Round(float64(i) * float64(n-1) / float64(k-1)))
	}
	return ranks
}

// cdfPoints pairs the values at ranks with their cumulative shares.
func cdfPoints(v []float64, ranks []int, n int) []Point {
	out := make([]Point, len(ranks))
	for i, r := range ranks {
		out[i] = Point{v[i], float64(r+1) / float64(n)}
	}
	return out
}

// CompareDists is Compare of two Dists: exactly Compare when both hold
// their values whole. When either is folded, the Mann-Whitney test runs
// on both samples binned as the sketch bins them (values within 0.1 %
// tie), with the normal approximation benchmath itself uses for samples
// this large, and says so (Approx) with the range the exact test's p is
// in: a pair of values sharing a bin counts ½ to U binned, 0 or 1 in
// truth, so U is within ± half the pairs that share bins, and the tie
// correction between the binned ties and none.
func CompareDists(base, other *Dist) Comparison {
	b, bok := base.Values()
	o, ook := other.Values()
	if bok && ook {
		return compareSorted(b, o)
	}
	c := Comparison{Base: base.Summary(), Other: other.Summary(), P: math.NaN(), Delta: math.NaN()}
	if base.N() == 0 || other.N() == 0 {
		return c
	}
	c.Approx = true
	c.P, c.PLo, c.PHi = uTestBinned(binned(base), binned(other))
	if c.Base.Median != 0 {
		c.Delta = c.Other.Median/c.Base.Median - 1
	}
	return c
}

// binned is d's values in the sketch's bins.
func binned(d *Dist) []bin {
	if d.sketch != nil {
		return d.bins()
	}
	f := &Dist{limit: -1}
	f.vals = d.vals
	f.fold()
	return f.bins()
}

// uTestBinned is the two-sided Mann-Whitney U test of two binned samples
// (bins in order, one mapping): each bin is a run of ties. It follows
// go-moremath's MannWhitneyUTest (what benchmath runs) on large samples:
// the normal approximation with the tie correction and a continuity
// correction; p is 1 when the samples cannot be told apart at all, as
// benchmath reports a failed test. lo and hi bound the p of the values
// unbinned.
func uTestBinned(a, b []bin) (p, lo, hi float64) {
	var n1, n2, r1, ties, shared float64
	rank := 0.0 // ranks given so far
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var v float64
		switch {
		case j == len(b) || (i < len(a) && a[i].v < b[j].v):
			v = a[i].v
		default:
			v = b[j].v
		}
		var ca, cb float64
		if i < len(a) && a[i].v == v {
			ca = a[i].count
			i++
		}
		if j < len(b) && b[j].v == v {
			cb = b[j].count
			j++
		}
		t := ca + cb
		r1 += ca * (rank + (t+1)/2) // the run's mean rank
		rank += t
		ties += t*t*t - t
		shared += ca * cb
		n1, n2 = n1+ca, n2+cb
	}
	u1 := r1 - n1*(n1+1)/2
	n := n1 + n2
	sigma := func(ties float64) float64 { return math.Sqrt(n1 * n2 * ((n + 1) - ties/(n*(n-1))) / 12) }
	pOf := func(u, sigma float64) float64 {
		if sigma == 0 || math.IsNaN(sigma) {
			return 1
		}
		num := u - n1*n2/2
		if num > 0 {
			num = max(num-0.5, 0)
		} else if num < 0 {
			num = min(num+0.5, 0)
		}
		z := num / sigma
		return clampP(2 * math.Min(mstats.StdNormal.CDF(z), 1-mstats.StdNormal.CDF(z)))
	}
	p = pOf(u1, sigma(ties))
	// The farthest U from its mean with the least spread, and the
	// nearest with the most: the exact p is between.
	center := n1 * n2 / 2
	uLo, uHi := u1-shared/2, u1+shared/2
	far, near := uLo, uHi
	if math.Abs(uHi-center) > math.Abs(uLo-center) {
		far, near = uHi, uLo
	}
	if uLo <= center && center <= uHi {
		near = center
	}
	sMin, sMax := sigma(ties), sigma(0) // ties shrink the spread
	lo, hi = min(pOf(far, sMin), pOf(far, sMax), p), max(pOf(near, sMax), pOf(near, sMin), p)
	return p, lo, hi
}

// distFormat is the first octet of an encoded Dist: its encoding's
// version.
const distFormat = 1

// MarshalBinary encodes d whole: its values while exact, else its sketch
// (DDSketch's own encoding, its index mapping included), so that a Dist
// decoded and merged gives every statistic the Dist itself would. A store
// keeps each run's cells so encoded, and a report merges them.
func (d *Dist) MarshalBinary() ([]byte, error) {
	b := binary.AppendUvarint([]byte{distFormat}, uint64(d.N()))
	if d.N() == 0 {
		return b, nil
	}
	if d.sketch != nil {
		b = append(b, 1)
		d.sketch.Encode(&b, false)
		return b, nil
	}
	b = append(b, 0)
	for _, v := range d.vals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b, nil
}

// decodeSketch merges an encoded sketch into s. sketches-go trusts its
// input: a bin index no value has (6.5e9, where float64s end near
// ±36,000 at doxlab's accuracy) panics in its collapsing store, found by
// FuzzDistUnmarshal; what a store or a cache file holds is not trusted.
func decodeSketch(s *ddsketch.DDSketch, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("damaged (%v)", r)
		}
	}()
	return s.DecodeAndMergeWith(b)
}

// checkBins refuses a decoded sketch whose bins no values could have
// filled: a count that is not positive, a value that is not a number
// (each quantile of one was NaN, found by FuzzDistUnmarshal).
func (d *Dist) checkBins() error {
	z := d.sketch.GetZeroCount()
	if !(z >= 0) || math.IsInf(z, 0) {
		return fmt.Errorf("damaged (%v values at zero)", z)
	}
	for _, b := range d.bins() {
		if !(b.count > 0) || math.IsInf(b.count, 0) || math.IsNaN(b.v) || math.IsInf(b.v, 0) {
			return fmt.Errorf("damaged (%v values at %v)", b.count, b.v)
		}
	}
	return nil
}

// UnmarshalBinary sets d to what MarshalBinary encoded.
func (d *Dist) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != distFormat {
		return errors.New("stats: not an encoded distribution, or of another version")
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > math.MaxInt32 {
		return errors.New("stats: an encoded distribution's count is cut short or too large")
	}
	*d = Dist{limit: ExactLimit, n: int(n)}
	b = b[1+k:]
	switch {
	case n == 0 && len(b) == 0:
		return nil
	case len(b) == 0:
		return errors.New("stats: an encoded distribution is cut short")
	case b[0] == 0:
		if uint64(len(b)-1) != 8*n || n > uint64(d.limit) {
			return fmt.Errorf("stats: an encoded distribution of %d values holds %d octets", n, len(b)-1)
		}
		d.vals = make([]float64, n)
		for i := range d.vals {
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[1+8*i:]))
			if math.IsNaN(v) || math.IsInf(v, 0) { // Add drops them: no Dist holds one
				*d = Dist{limit: ExactLimit}
				return fmt.Errorf("stats: an encoded distribution holds %v, which is no value", v)
			}
			d.vals[i] = v
		}
		return nil
	case b[0] == 1:
		d.fold() // an empty sketch of the mapping and bounds Add folds into
		err := decodeSketch(d.sketch, b[1:])
		d.memo = err == nil && memoFor(d.sketch) // the mapping decoded
		if err == nil {
			err = d.checkBins()
		}
		if err != nil {
			*d = Dist{limit: ExactLimit}
			return fmt.Errorf("stats: an encoded sketch: %w", err)
		}
		if c := d.sketch.GetCount(); c != float64(n) {
			return fmt.Errorf("stats: an encoded sketch holds %g values, not %d", c, n)
		}
		return nil
	}
	return fmt.Errorf("stats: an encoded distribution of unknown kind %d", b[0])
}

package stats

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
)

// TestMemoIsTheMapping: memo gives each whole number of thousandths the
// bin the sketch's own mapping gives it, and nothing else a bin; a Dist
// folded with memo (and the last other value's bin) is the sketch that
// Add alone makes, bin for bin, its encoding octet for octet, also after
// it is decoded and added to.
func TestMemoIsTheMapping(t *testing.T) {
	m := memoMapping()
	for k := 1; k < memoLimit; k++ {
		v := float64(k) / 1000
		if i, ok := memoIndex(v); !ok || i != m.Index(v) {
			t.Fatalf("memoIndex(%v) = %d, %v; the mapping's bin is %d", v, i, ok, m.Index(v))
		}
	}
	for _, v := range []float64{0, 0.0005, 0.0015, 1.0001, 1 + 1e-15, float64(memoLimit) / 1000, 2000, -1, -0.001, math.SmallestNonzeroFloat64} {
		if i, ok := memoIndex(v); ok {
			t.Errorf("memoIndex(%v) = %d: not a whole number of thousandths memo holds", v, i)
		}
	}

	// Whole thousandths (most), others, negatives, zeros, the large and
	// the tiny: every path of a sketch's Add.
	r := rand.New(rand.NewPCG(3, 4))
	v := lognormal(r, 30000, 3)
	for i := range 3000 {
		v = append(v, r.Float64()*50, -float64(i)/1000, 0, 1e6+float64(i), 1e-300*float64(i+1),
			0.1234567*float64(1+i%3), 0.1234567*float64(1+i%3)) // repeated, as serialization times are
	}
	v = append(v, math.MaxFloat64) // past the sketch's range: dropped by both
	want, err := ddsketch.LogCollapsingLowestDenseDDSketch(SketchAccuracy, MaxSketchBins)
	if err != nil {
		t.Fatal(err)
	}
	half := len(v) / 2
	d := NewDist()
	for _, x := range v[:half] {
		d.Add(x)
		want.Add(x)
	}
	if !d.memo {
		t.Fatal("a folded Dist does not use memo")
	}
	sameSketch(t, "folded", d, want)

	b, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Dist
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !back.memo {
		t.Fatal("a decoded Dist does not use memo")
	}
	for _, x := range v[half:] {
		back.Add(x)
		want.Add(x)
	}
	sameSketch(t, "decoded and added to", &back, want)
}

func sameSketch(t *testing.T, what string, d *Dist, want *ddsketch.DDSketch) {
	t.Helper()
	var got, exp []byte
	d.sketch.Encode(&got, false)
	want.Encode(&exp, false)
	if !bytes.Equal(got, exp) {
		t.Fatalf("%s: the Dist's sketch (%d octets) is not the one Add makes (%d)", what, len(got), len(exp))
	}
}

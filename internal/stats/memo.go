package stats

import (
	"sync"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
)

// A sketch finds a value's bin by its logarithm, and that logarithm was
// a quarter of a first report's CPU at ten million samples. doxlab's
// timings and RTTs are whole numbers of thousandths (the store keeps
// them so, and gives each back as float64(k)/1000), so the bin of each
// such value below memoLimit is worked out once, by the sketch's own
// mapping, and looked up: a Dist is the same, bin for bin, with or
// without it (TestMemoIsTheMapping).
const memoLimit = 1 << 20 // thousandths: values up to about 1 s, 4 MiB

var memo struct {
	once    sync.Once
	mapping *mapping.LogarithmicMapping // fold's, made alike
	index   []int32                     // index[k] is the bin of k/1000
}

// memoMapping is the mapping whose bins memo holds.
func memoMapping() *mapping.LogarithmicMapping {
	memo.once.Do(func() {
		m, err := mapping.NewLogarithmicMapping(SketchAccuracy)
		if err != nil {
			panic(err) // only for an accuracy outside (0, 1)
		}
		memo.mapping = m
		memo.index = make([]int32, memoLimit)
		for k := 1; k < memoLimit; k++ {
			memo.index[k] = int32(m.Index(float64(k) / 1000))
		}
	})
	return memo.mapping
}

// memoFor is whether memo's bins are s's: its mapping is memo's, field
// for field (a decoded sketch brings its own).
func memoFor(s *ddsketch.DDSketch) bool {
	m, ok := s.IndexMapping.(*mapping.LogarithmicMapping)
	return ok && *m == *memoMapping()
}

// memoIndex is v's bin if v is a whole number of thousandths that memo
// holds.
func memoIndex(v float64) (int, bool) {
	if !(v >= 0.001 && v < float64(memoLimit)/1000) {
		return 0, false
	}
	k := int(v*1000 + 0.5)
	if k >= memoLimit || float64(k)/1000 != v {
		return 0, false
	}
	return int(memo.index[k]), true
}

package testbed

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// lateness counts how late the writers delivered packets, in log-linear
// buckets (exact below 16 µs, then four per power of two, so a bucket is
// at most 25 % wide): the emulator's own share of the RTT error, kept
// apart from what the kernels along the path add. Counting is two atomic
// adds; a percentile is read from the difference of two snapshots.
type lateness [lateBuckets]atomic.Uint64

const lateBuckets = 16 + 4*(40-4) // up to ~2^40 µs: everything

func lateBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 16 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // ≥ 4
	return min(16+(e-4)*4+int(us>>(e-2)&3), lateBuckets-1)
}

// lateBound is the upper bound of bucket i.
func lateBound(i int) time.Duration {
	if i < 16 {
		return time.Duration(i+1) * time.Microsecond
	}
	e, sub := (i-16)/4+4, (i-16)%4
	return time.Duration((uint64(4+sub+1))<<(e-2)) * time.Microsecond
}

func (l *lateness) add(d time.Duration) { l[lateBucket(d)].Add(1) }

// lateCounts is a snapshot of the counts, summed over links.
type lateCounts [lateBuckets]uint64

func (e *emulator) lateness() lateCounts {
	var c lateCounts
	for _, l := range e.all {
		for i := range c {
			c[i] += l.late[i].Load()
		}
	}
	return c
}

// since is the counts from before to c.
func (c lateCounts) since(before lateCounts) lateCounts {
	for i := range c {
		c[i] -= before[i]
	}
	return c
}

// quantile is the upper bound of the bucket holding quantile q, 0 if none.
func (c lateCounts) quantile(q float64) time.Duration {
	var n uint64
	for _, v := range c {
		n += v
	}
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n-1))
	for i, v := range c {
		if rank < v {
			return lateBound(i)
		}
		rank -= v
	}
	return lateBound(lateBuckets - 1)
}

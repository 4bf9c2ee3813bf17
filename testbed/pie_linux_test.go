package testbed

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pieAt is a PIE whose updates run every tupdate of logical time from
// t0, each seeing queueing delay q, and whose draws are seeded.
func pieAt(t0 time.Time) (s *pieState, run func(q time.Duration, updates int)) {
	s = newPIE()
	s.rng = rand.New(rand.NewPCG(1, 2))
	s.advance(t0)
	now := t0
	return s, func(q time.Duration, updates int) {
		for range updates {
			s.qdelay = q
			now = now.Add(s.tupdate)
			s.advance(now)
		}
	}
}

// TestPIEUpdatesAsRFC8033: the drop probability's updates (RFC 8033
// §4.2), checked against the RFC's arithmetic: the first step from zero
// scaled down by 2048, growth while the delay stands above the 15 ms
// target and not below it, the extra 2 % past 250 ms, the decay while
// idle, bounds of 0 and 1, and the burst allowance spent 15 ms an update
// and given back once the queue has drained.
func TestPIEUpdatesAsRFC8033(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s, run := pieAt(t0)
	require.Zero(t, s.p)

	// Below half the target: nothing moves, the allowance stays whole.
	run(5*time.Millisecond, 200)
	require.Zero(t, s.p)
	require.Equal(t, 150*time.Millisecond, s.burst)

	// 40 ms: delta = α(0.040-0.015) + β(0.040-0.005), from p = 0 scaled
	// by 1/2048 (§4.2's table).
	run(40*time.Millisecond, 1)
	want := (0.125*0.025 + 1.25*0.035) / 2048
	require.InDelta(t, want, s.p, 1e-15)
	require.Equal(t, 135*time.Millisecond, s.burst, "an update spends 15 ms of the allowance")

	// Standing at 40 ms: p grows every update, in steps that grow with
	// it, and the allowance is spent after 150 ms.
	prev := s.p
	for i := range 300 {
		run(40*time.Millisecond, 1)
		require.Greater(t, s.p, prev, "update %d", i)
		prev = s.p
	}
	require.Zero(t, s.burst)
	require.Greater(t, s.p, 0.1)

	// Past 250 ms with p ≥ 10 %: delta unscaled, and 2 % more at once.
	s.p, s.qdelay, s.qdelayOld = 0.5, 300*time.Millisecond, 300*time.Millisecond
	s.update()
	require.InDelta(t, 0.5+0.125*0.285+0.02, s.p, 1e-12)

	// Idle (no queue now or at the last update): the step down, then
	// decay by 2 %.
	s.p, s.qdelay, s.qdelayOld = 0.5, 0, 0
	s.update()
	require.InDelta(t, (0.5-0.125*0.015)*0.98, s.p, 1e-12)

	// Bounded: a delay of seconds takes p to 1, no further.
	run(2*time.Second, 300)
	require.Equal(t, 1.0, s.p)

	// Under the target (not under half of it) p falls back to 0 and stays
	// there; the allowance comes back only once two updates running saw
	// less than half the target.
	s.p, s.qdelayOld = 0.5, 10*time.Millisecond
	prev = s.p
	for s.p > 0 {
		run(10*time.Millisecond, 1)
		require.Less(t, s.p, prev)
		prev = s.p
	}
	run(10*time.Millisecond, 50)
	require.Zero(t, s.p)
	require.Zero(t, s.burst, "a queue of 10 ms is still a queue")
	run(time.Millisecond, 1)
	require.Zero(t, s.burst, "the update before still saw 10 ms")
	run(time.Millisecond, 1)
	require.Equal(t, 150*time.Millisecond, s.burst)
}

// TestPIEDropsAsRFC8033: drop_early (RFC 8033 §4.1): nothing while the
// burst allowance lasts, nor into a queue of two packets or less, nor
// while the last delay was under half the target and p under 20 %;
// otherwise a packet is dropped with probability p.
func TestPIEDropsAsRFC8033(t *testing.T) {
	const big = 100 * 1500
	drops := func(s *pieState, queued, n int) int {
		d := 0
		for range n {
			if s.dropOnArrival(queued) {
				d++
			}
		}
		return d
	}
	s, _ := pieAt(time.Unix(1000, 0))
	s.p, s.qdelayOld = 1, time.Second
	require.Zero(t, drops(s, big, 1000), "the burst allowance")
	s.burst = 0
	require.Zero(t, drops(s, 2*1500, 1000), "two packets queued are no standing queue")
	require.Equal(t, 1000, drops(s, 2*1500+1, 1000))

	s.p, s.qdelayOld = 0.19, 7*time.Millisecond
	require.Zero(t, drops(s, big, 1000), "a short queue last time and p under 20 %")
	s.p = 0.25
	got := float64(drops(s, big, 20000)) / 20000
	require.InDelta(t, 0.25, got, 0.015, "p ≥ 20 % drops even after a short queue")
	s.p, s.qdelayOld = 0.05, 20*time.Millisecond
	got = float64(drops(s, big, 40000)) / 40000
	require.InDelta(t, 0.05, got, 0.006, "a standing queue: dropped with probability p")
	s.p = 0
	require.Zero(t, drops(s, big, 1000))
}

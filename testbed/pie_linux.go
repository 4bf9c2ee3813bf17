package testbed

import (
	"math/rand/v2"
	"time"
)

// PIE (RFC 8033): a drop probability, updated every 15 ms from how far
// the queueing delay is above its 15 ms target and how it moved, applied
// to packets as they arrive, after a burst allowance of 150 ms. Like
// CoDel it runs in the emulator's logical time; the queueing delay is
// measured with timestamps (RFC 8033 §5.1's alternative to estimating
// the departure rate): the time the last packet to leave spent queued.
type pieState struct {
	target, tupdate, maxBurst time.Duration
	alpha, beta               float64 // per second (RFC 8033 §4.2: 0.125 and 1.25)

	p          float64
	qdelay     time.Duration // the last packet's time in the queue; 0 once the queue empties
	qdelayOld  time.Duration
	burst      time.Duration // what is left of the burst allowance
	lastUpdate time.Time
	rng        *rand.Rand
}

func newPIE() *pieState {
	return &pieState{target: 15 * time.Millisecond, tupdate: 15 * time.Millisecond, maxBurst: 150 * time.Millisecond,
		alpha: 0.125, beta: 1.25, burst: 150 * time.Millisecond, rng: rand.New(rand.NewPCG(rand.Uint64(), 1))}
}

// advance runs the probability updates due by now (RFC 8033 §4.2).
func (s *pieState) advance(now time.Time) {
	if s.lastUpdate.IsZero() {
		s.lastUpdate = now
		return
	}
	for !s.lastUpdate.Add(s.tupdate).After(now) {
		s.lastUpdate = s.lastUpdate.Add(s.tupdate)
		s.update()
	}
}

func (s *pieState) update() {
	q, old, ref := s.qdelay.Seconds(), s.qdelayOld.Seconds(), s.target.Seconds()
	delta := s.alpha*(q-ref) + s.beta*(q-old)
	// Small probabilities move in small steps, so that a light load is
	// not hit by a large first drop probability (§4.2's auto-tuning).
	switch {
	case s.p < 0.000001:
		delta /= 2048
	case s.p < 0.00001:
		delta /= 512
	case s.p < 0.0001:
		delta /= 128
	case s.p < 0.001:
		delta /= 32
	case s.p < 0.01:
		delta /= 8
	case s.p < 0.1:
		delta /= 2
	}
	s.p += delta
	if s.qdelay > 250*time.Millisecond && s.p >= 0.1 {
		s.p += 0.02 // a delay far over the target: act at once
	}
	s.p = min(max(s.p, 0), 1)
	if s.qdelay == 0 && s.qdelayOld == 0 {
		s.p *= 0.98 // idle: decay
	}
	s.burst = max(s.burst-s.tupdate, 0)
	if s.p == 0 && s.qdelay < s.target/2 && s.qdelayOld < s.target/2 {
		s.burst = s.maxBurst
	}
	s.qdelayOld = s.qdelay
}

// dropOnArrival is RFC 8033 §4.1's drop_early for a packet arriving at a
// queue of queued octets.
func (s *pieState) dropOnArrival(queued int) bool {
	switch {
	case s.burst > 0:
		return false
	case s.qdelayOld < s.target/2 && s.p < 0.2:
		return false
	case queued <= 2*1500: // a queue of a packet or two is not a standing queue
		return false
	}
	return s.rng.Float64() < s.p
}

package testbed

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// stage is one direction of one link: a tail-drop queue in front of a
// rate limit (a fixed rate, or a trace's delivery opportunities), then
// loss, propagation delay and jitter. It computes when a
// packet leaves rather than holding it, so the queue costs no memory and
// the computation is exact; the writer thread then sleeps until then.
type stage struct {
	mu      sync.Mutex
	d       Direction
	rnd     *rand.Rand
	bad     bool         // Gilbert-Elliott state
	rateEnd time.Time    // when the rate limiter finishes the last accepted packet
	last    time.Time    // the last departure: jitter never reorders
	queued  []queued     // packets still in the rate queue, for packet/byte limits
	trace   *traceCursor // a trace instead of a fixed rate
	aqm     *aqmLink     // CoDel or FQ-CoDel instead of tail drop
	aqmOn   atomic.Bool  // aqm != nil, read without the lock

	Sent, Dropped, Lost uint64
}

type queued struct {
	end  time.Time
	size int
}

func newStage(d Direction, seed uint64) *stage {
	s := &stage{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	s.set(d)
	return s
}

// set switches the stage's parameters; packets already scheduled keep
// theirs. A trace starts from its beginning now. The profile was
// validated, so its trace loads (from the cache).
func (s *stage) set(d Direction) {
	var tc *traceCursor
	if d.Trace != "" {
		if tr, err := cachedTrace(d.Trace); err == nil {
			tc = newTraceCursor(tr, time.Now())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aqm != nil { // what the old queue holds is dropped with it
		s.Dropped += uint64(s.aqm.q.n + len(s.aqm.pending))
	}
	s.d, s.trace, s.aqm = d, tc, nil
	if d.Queue == "codel" || d.Queue == "fq_codel" || d.Queue == "pie" {
		s.aqm = &aqmLink{q: newAQM(d.Queue, d.CoDel, d.QueuePackets), serve: s.serve}
	}
	s.aqmOn.Store(s.aqm != nil)
}

// serve is when a packet of size octets starting on the link at start
// has left it: at the rate, or by the trace. The caller holds mu.
func (s *stage) serve(start time.Time, size int) time.Time {
	if s.trace != nil {
		return s.trace.serve(start, size)
	}
	return start.Add(time.Duration(float64(size*8) / s.d.Rate * float64(time.Second)))
}

// propagate adds the delay and jitter to a packet that left the queue at
// t, never before the one before it. The caller holds mu.
func (s *stage) propagate(t time.Time) time.Time {
	out := t.Add(s.d.Delay)
	if s.d.Jitter > 0 {
		out = out.Add(time.Duration(s.rnd.Int64N(int64(s.d.Jitter))))
	}
	if out.Before(s.last) {
		out = s.last // jitter must not reorder
	}
	s.last = out
	return out
}

// admit hands a packet that reaches an AQM stage at t to its queue (data
// is kept: the caller's buffer is not); next gets its departure from
// the stage once run has sent it.
func (s *stage) admit(t time.Time, data []byte, next func(time.Time)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose() {
		s.Lost++
		return
	}
	s.aqm.admit(aqmPacket{arrival: t, size: len(data), data: data, next: next})
}

// run sends what an AQM stage's link sends up to now and hands each
// packet on; it returns when it has work next (zero: none).
func (s *stage) run(now time.Time) time.Time {
	type out struct {
		next func(time.Time)
		t    time.Time
	}
	var outs []out
	s.mu.Lock()
	s.aqm.run(now, func(p aqmPacket, end time.Time) {
		s.Sent++
		outs = append(outs, out{p.next, s.propagate(end)})
	}, func(aqmPacket) {})
	next := s.aqm.next()
	s.mu.Unlock()
	for _, o := range outs {
		o.next(o.t) // outside the lock: it may reach another stage
	}
	return next
}

// limited reports whether a rate or a trace paces the stage.
func (s *stage) limited() bool { return s.d.Rate > 0 || s.trace != nil }

// delay is the stage's propagation delay.
func (s *stage) delay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Delay
}

// transparent reports whether the stage would pass every packet at once.
func (s *stage) transparent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.transparent()
}

// schedule returns when a packet of size bytes that is ready at t leaves
// this stage, or false when it is dropped (queue full) or lost.
func (s *stage) schedule(t time.Time, size int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limited() {
		// Forget packets the rate limiter has finished with.
		i := 0
		for i < len(s.queued) && !s.queued[i].end.After(t) {
			i++
		}
		s.queued = s.queued[i:]
		if s.full(t, size) {
			s.Dropped++
			return time.Time{}, false
		}
	}
	if s.lose() {
		s.Lost++
		return time.Time{}, false
	}
	out := t
	if s.limited() {
		start := t
		if s.rateEnd.After(start) {
			start = s.rateEnd
		}
		s.rateEnd = s.serve(start, size)
		s.queued = append(s.queued, queued{end: s.rateEnd, size: size})
		out = s.rateEnd
	}
	s.Sent++
	return s.propagate(out), true
}

// full reports whether the queue has no room for size more bytes.
func (s *stage) full(t time.Time, size int) bool {
	d := &s.d
	backlog := 0
	for _, q := range s.queued {
		backlog += q.size
	}
	switch {
	case d.QueueBytes > 0:
		return backlog+size > d.QueueBytes
	case d.QueueTime > 0:
		return s.rateEnd.Sub(t) > d.QueueTime
	case d.QueuePackets > 0:
		return len(s.queued) >= d.QueuePackets
	}
	return len(s.queued) >= 1000
}

func (s *stage) lose() bool {
	d := &s.d
	if g := d.GilbertElliott; g != nil {
		if s.bad {
			if s.rnd.Float64() < g.R {
				s.bad = false
			}
		} else if s.rnd.Float64() < g.P {
			s.bad = true
		}
		p := g.LossGood
		if s.bad {
			p = g.LossBad
		}
		return s.rnd.Float64() < p
	}
	return d.Loss > 0 && s.rnd.Float64() < d.Loss
}

// queueSnapshot reads an AQM stage's counters: the sojourn histogram of
// the packets sent, CoDel's drops and the drops over the limit.
func (s *stage) queueSnapshot() (sojourn lateCounts, drops, overlimit uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aqm == nil {
		return sojourn, 0, 0, false
	}
	for i := range sojourn {
		sojourn[i] = s.aqm.sojourn[i].Load()
	}
	return sojourn, s.aqm.q.Drops, s.aqm.q.Overlimit, true
}

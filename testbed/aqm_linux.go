package testbed

import (
	"hash/maphash"
	"math"
	"time"
)

// The active queue disciplines a direction may use instead of tail drop:
// CoDel (RFC 8289), FQ-CoDel (RFC 8290) and PIE (RFC 8033). CoDel decides
// at dequeue, when a packet reaches the head and the link is free, and
// PIE on arrival from the delays of the packets that left, so unlike tail
// drop they cannot be computed as each packet arrives: an aqmQueue holds the
// packets and is run in logical time (the packets' kernel timestamps and
// the link's own clock), so its decisions are exact whenever the
// emulator gets to them.

// aqmPacket is a packet held by an aqmQueue.
type aqmPacket struct {
	arrival time.Time
	size    int
	data    []byte
	next    func(depart time.Time) // where it goes once it has left the queue
}

// codelState is one CoDel instance: the queue it manages and its
// control law's state (RFC 8289 §5).
type codelState struct {
	q            []aqmPacket
	bytes        int
	firstAbove   time.Time // zero: sojourn below target
	dropNext     time.Time
	count        int
	lastCount    int
	dropping     bool
	maxPacket    int
	target, intv time.Duration
}

func (c *codelState) push(p aqmPacket) {
	c.q = append(c.q, p)
	c.bytes += p.size
}

func (c *codelState) pop() (aqmPacket, bool) {
	if len(c.q) == 0 {
		return aqmPacket{}, false
	}
	p := c.q[0]
	c.q[0] = aqmPacket{}
	c.q = c.q[1:]
	c.bytes -= p.size
	return p, true
}

// doDequeue is RFC 8289's dodequeue: the head packet, and whether the
// sojourn has stayed above target for an interval.
func (c *codelState) doDequeue(now time.Time) (aqmPacket, bool, bool) {
	p, ok := c.pop()
	if !ok {
		c.firstAbove = time.Time{}
		return p, false, false
	}
	sojourn := now.Sub(p.arrival)
	if sojourn < c.target || c.bytes <= c.maxPacket {
		c.firstAbove = time.Time{}
		return p, true, false
	}
	if c.firstAbove.IsZero() {
		c.firstAbove = now.Add(c.intv)
		return p, true, false
	}
	return p, true, !now.Before(c.firstAbove)
}

// controlLaw is the next drop: interval / sqrt(count) after t.
func (c *codelState) controlLaw(t time.Time) time.Time {
	return t.Add(time.Duration(float64(c.intv) / math.Sqrt(float64(c.count))))
}

// dequeue is RFC 8289's dequeue at time now; drop is called for each
// packet CoDel drops.
func (c *codelState) dequeue(now time.Time, drop func(aqmPacket)) (aqmPacket, bool) {
	p, ok, okToDrop := c.doDequeue(now)
	switch {
	case !ok:
		c.dropping = false
		return p, false
	case c.dropping:
		if !okToDrop {
			c.dropping = false
		}
		for c.dropping && !now.Before(c.dropNext) {
			drop(p)
			c.count++
			p, ok, okToDrop = c.doDequeue(now)
			if !ok {
				c.dropping = false
				return p, false
			}
			if !okToDrop {
				c.dropping = false
			} else {
				c.dropNext = c.controlLaw(c.dropNext)
			}
		}
	case okToDrop:
		drop(p)
		p, ok, _ = c.doDequeue(now)
		c.dropping = true
		delta := c.count - c.lastCount
		c.count = 1
		if delta > 1 && now.Sub(c.dropNext) < 16*c.intv {
			c.count = delta
		}
		c.dropNext = c.controlLaw(now)
		c.lastCount = c.count
		if !ok {
			return p, false
		}
	}
	return p, true
}

// aqmQueue is CoDel or FQ-CoDel in front of a link: packets go in with
// their arrival time, and come out (or are dropped) when the link asks
// for the next one.
type aqmQueue struct {
	fq      bool
	pie     *pieState // PIE instead of CoDel: drops on arrival, one queue
	limit   int       // packets, all flows together
	n       int
	flows   []*fqFlow // FQ-CoDel: 1024 queues; CoDel: one
	newList []*fqFlow
	oldList []*fqFlow
	quantum int
	seed    maphash.Seed

	Drops, Overlimit uint64 // CoDel's drops; packets over the limit
}

type fqFlow struct {
	codelState
	deficit int
	active  bool
}

// fqFlows is RFC 8290's default number of flow queues.
const fqFlows = 1024

func newAQM(kind string, c CoDel, limit int) *aqmQueue {
	c = c.withDefaults()
	if limit <= 0 {
		limit = 1000
	}
	fq := kind == "fq_codel"
	a := &aqmQueue{fq: fq, limit: limit, quantum: 1514, seed: maphash.MakeSeed()}
	if kind == "pie" {
		a.pie = newPIE()
	}
	n := 1
	if fq {
		n = fqFlows
	}
	for range n {
		a.flows = append(a.flows, &fqFlow{codelState: codelState{maxPacket: 1500, target: c.Target, intv: c.Interval}})
	}
	return a
}

// flowOf hashes an IPv4 packet's protocol, addresses and, for TCP and
// UDP, ports: RFC 8290's 5-tuple.
func (a *aqmQueue) flowOf(data []byte) *fqFlow {
	if !a.fq || len(data) < 20 {
		return a.flows[0]
	}
	var key [13]byte
	key[0] = data[9]
	copy(key[1:9], data[12:20])
	if ihl := int(data[0]&0x0f) * 4; (data[9] == 6 || data[9] == 17) && len(data) >= ihl+4 {
		copy(key[9:13], data[ihl:ihl+4])
	}
	return a.flows[maphash.Bytes(a.seed, key[:])%fqFlows]
}

// empty reports whether no packet is queued.
func (a *aqmQueue) empty() bool { return a.n == 0 }

// enqueue adds a packet that arrived at p.arrival; over the limit, a
// packet is dropped: the arriving one under CoDel, the head of the
// flow with most bytes under FQ-CoDel (RFC 8290 §4.1).
func (a *aqmQueue) enqueue(p aqmPacket, drop func(aqmPacket)) {
	if a.pie != nil {
		a.pie.advance(p.arrival)
		if a.pie.dropOnArrival(a.flows[0].bytes) {
			a.Drops++
			drop(p)
			return
		}
	}
	f := a.flowOf(p.data)
	f.push(p)
	a.n++
	if a.fq && !f.active {
		f.active, f.deficit = true, a.quantum
		a.newList = append(a.newList, f)
	}
	if a.n <= a.limit {
		return
	}
	a.Overlimit++
	victim := f
	if a.fq {
		for _, g := range a.flows {
			if g.bytes > victim.bytes {
				victim = g
			}
		}
		if q, ok := victim.pop(); ok {
			a.n--
			drop(q)
		}
		return
	}
	// CoDel alone: tail drop, the packet just added.
	victim.q = victim.q[:len(victim.q)-1]
	victim.bytes -= p.size
	a.n--
	drop(p)
}

// dequeue gives the next packet to send at now, dropping what CoDel
// drops.
func (a *aqmQueue) dequeue(now time.Time, drop func(aqmPacket)) (aqmPacket, bool) {
	counted := func(p aqmPacket) { a.n--; a.Drops++; drop(p) }
	if a.pie != nil {
		a.pie.advance(now)
		p, ok := a.flows[0].pop()
		if ok {
			a.n--
			a.pie.qdelay = now.Sub(p.arrival)
		}
		if a.n == 0 {
			a.pie.qdelay = 0
		}
		return p, ok
	}
	if !a.fq {
		p, ok := a.flows[0].dequeue(now, counted)
		if ok {
			a.n--
		}
		return p, ok
	}
	for {
		var f *fqFlow
		fromNew := len(a.newList) > 0
		switch {
		case fromNew:
			f = a.newList[0]
		case len(a.oldList) > 0:
			f = a.oldList[0]
		default:
			return aqmPacket{}, false
		}
		if f.deficit <= 0 {
			f.deficit += a.quantum
			a.moveToOld(f, fromNew)
			continue
		}
		p, ok := f.dequeue(now, counted)
		if !ok {
			// An empty new flow goes to the old list, so that it cannot
			// come back as new at once (RFC 8290 §4.2); an empty old flow
			// leaves.
			if fromNew && len(a.oldList) > 0 {
				a.moveToOld(f, true)
			} else {
				a.remove(f, fromNew)
			}
			continue
		}
		a.n--
		f.deficit -= p.size
		return p, true
	}
}

func (a *aqmQueue) moveToOld(f *fqFlow, fromNew bool) {
	if fromNew {
		a.newList = a.newList[1:]
	} else {
		a.oldList = a.oldList[1:]
	}
	a.oldList = append(a.oldList, f)
}

func (a *aqmQueue) remove(f *fqFlow, fromNew bool) {
	if fromNew {
		a.newList = a.newList[1:]
	} else {
		a.oldList = a.oldList[1:]
	}
	f.active = false
}

// aqmLink is a stage's queue and link when its queue is CoDel or
// FQ-CoDel: arrivals wait in pending until their time comes, then in the
// queue until the link takes them; run advances it in logical time.
type aqmLink struct {
	q         *aqmQueue
	pending   []aqmPacket // arrived at the stage in the future (from an upstream stage), by arrival
	busyUntil time.Time   // the link sends the previous packet until then
	serve     func(start time.Time, size int) time.Time
	sojourn   lateness // time in the queue of the packets sent
}

// admit takes a packet arriving at p.arrival, which may lie ahead (it
// is still on an upstream link).
func (l *aqmLink) admit(p aqmPacket) {
	i := len(l.pending)
	for i > 0 && l.pending[i-1].arrival.After(p.arrival) {
		i--
	}
	l.pending = append(l.pending, aqmPacket{})
	copy(l.pending[i+1:], l.pending[i:])
	l.pending[i] = p
}

// run sends everything the link sends up to now: each packet leaves the
// queue when the link is free and it is at the head; CoDel decides then.
// leave gets each packet sent with the time its last octet is out; drop
// each packet the queue drops.
func (l *aqmLink) run(now time.Time, leave func(aqmPacket, time.Time), drop func(aqmPacket)) {
	for {
		// The next moment the link takes a packet: when it is free, or
		// when the first packet arrives at an empty queue.
		at := l.busyUntil
		if l.q.empty() {
			if len(l.pending) == 0 {
				return
			}
			at = maxTime(at, l.pending[0].arrival)
		}
		if at.After(now) {
			l.enqueueUntil(now, drop)
			return
		}
		l.enqueueUntil(at, drop)
		p, ok := l.q.dequeue(at, drop)
		if !ok {
			continue // CoDel emptied the queue; wait for the next arrival
		}
		l.sojourn.add(at.Sub(p.arrival))
		l.busyUntil = l.serve(at, p.size)
		leave(p, l.busyUntil)
	}
}

// enqueueUntil moves the pending packets that have arrived by t into the
// queue, in arrival order.
func (l *aqmLink) enqueueUntil(t time.Time, drop func(aqmPacket)) {
	i := 0
	for ; i < len(l.pending) && !l.pending[i].arrival.After(t); i++ {
		l.q.enqueue(l.pending[i], drop)
	}
	clear(l.pending[:i])
	l.pending = l.pending[i:]
}

// next is when run has work next: the link freeing with packets queued,
// or the next arrival; zero when there is none.
func (l *aqmLink) next() time.Time {
	switch {
	case !l.q.empty():
		return l.busyUntil
	case len(l.pending) > 0:
		return maxTime(l.busyUntil, l.pending[0].arrival)
	}
	return time.Time{}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/transport"
)

// The lean path is how a reused-connection, open-loop run goes over UDP,
// TCP, DoT, DoH/2, DoH/3 and DoQ: each connection has a sender that writes every query
// due, in batches, packed in advance with only its ID (or HTTP/2 stream)
// set, and a receiver that matches answers to their slot and records
// them, with no per-query goroutine, record or kernel timestamp. It costs
// a few microseconds of CPU per query where the transport's Exchange,
// which records everything about every exchange, costs tens: a load
// generator has to be cheaper than the server it loads. What it does not
// record per query (addresses, bytes, TLS facts) is the same for every
// query of a connection, and the connection's handshake is recorded.

// pipe is one connection of the lean path.
type pipe interface {
	// write sends one query per seq: the DNS message q[i] is the query
	// mix's, with ID 0, which write may change in place.
	write(seqs []uint32, qs [][]byte) error
	// read blocks for answers and calls got for each, from one
	// goroutine: the seq's low 16 bits, and how it ended (answerStatus:
	// its status and rcode, noRcode without an answer).
	read(got func(slot uint16, st transport.Status, rcode int)) error
	// limit is how many queries may be in flight on it (HTTP/2's
	// SETTINGS_MAX_CONCURRENT_STREAMS); at most 65535.
	limit() int
	close() error
}

// Lean says whether c runs on the lean path.
func Lean(c Config) bool {
	if c.Rate <= 0 || !c.Options.Reuse || c.Full {
		return false
	}
	ep, err := transport.ParseURL(c.URL)
	if err != nil {
		return false
	}
	switch ep.Protocol {
	case transport.ProtoUDP, transport.ProtoTCP, transport.ProtoDoT, transport.ProtoDoQ, transport.ProtoDoH3:
		return true
	case transport.ProtoDoH2:
		return c.Options.HTTPVersion == "" || c.Options.HTTPVersion == "2"
	}
	return false
}

// flight is a query in flight: when it was due and when it was written,
// in ns since the start (at least 1); zero sent means the slot is free.
type flight struct {
	due, sent int64
}

// leanConn is a pipe with its slots. Its sender replaces the pipe when
// the server ends it (p and dead are the sender's to change).
type leanConn struct {
	p         pipe
	dead      chan struct{} // closed when p's reader has stopped
	lossNoted bool          // why p ended is noted (under the run's rmu)
	mu        sync.Mutex
	slots     [1 << 16]flight
	free      chan struct{} // a token per query the pipe may still take
}

// maxRevivals bounds how often one connection is replaced in a run, so
// that a server closing every connection at once does not turn the run
// into a connection storm.
const maxRevivals = 1000

var errTooManyRevivals = fmt.Errorf("replaced %d times already", maxRevivals)

// runLean is Run on the lean path.
func runLean(ctx context.Context, c Config, res *Result) error {
	r, err := newLeanRun(c, res)
	if err != nil {
		return err
	}
	defer r.closeAll()
	if err := r.dial(ctx); err != nil {
		return err
	}
	r.start = time.Now()
	res.Start = r.start
	r.end = r.start.Add(c.Duration)
	// Waiting for a query's due time ends only when the caller cancels
	// (interrupted): a query due before the end is sent however late the
	// timer fires. Waiting for room ends at the end too.
	r.interrupted = ctx.Done()
	ctx, cancel := context.WithDeadline(ctx, r.end)
	defer cancel()
	if c.Progress != nil {
		stop := reportProgress(ctx, c, r.start, func(p *Progress) {
			r.mu.Lock()
			defer r.mu.Unlock()
			p.snapshot(int(r.sent.Load()), res, r.interval)
		})
		defer stop()
	}
	var sweeper sync.WaitGroup
	sweeper.Go(r.sweep)
	for _, lc := range r.conns {
		r.startReader(lc)
	}
	var senders sync.WaitGroup
	for k, lc := range r.conns {
		s := r.newSender(ctx, k, lc)
		senders.Go(s.run)
	}
	senders.Wait()
	sendEnd := time.Now()
	res.Sent, res.Unsent = int(r.sent.Load()), int(r.unsent.Load())
	r.drain()
	close(r.sweepDone)
	sweeper.Wait()
	r.stopReaders()
	return r.summarize(sendEnd)
}

// leanRun is one run of the lean path: its connections, the schedule,
// the window of queries in flight, and what it has counted so far.
type leanRun struct {
	c       Config
	res     *Result
	ep      *transport.Endpoint
	mix     [][]byte // the query mix, packed once, with ID 0
	order   []int    // which of mix each query sends, in turn
	conns   []*leanConn
	timeout int64 // ns, from Options.Timeout
	// start and end bound the schedule; interrupted is the caller's
	// cancellation, which alone cuts a due query's wait short.
	start, end  time.Time
	interrupted <-chan struct{}

	// A query takes a token of its connection's room (leanConn.free)
	// and puts one into global, which holds MaxInFlight at most; its
	// answer, its timeout or its connection's loss gives them back.
	global   chan struct{}
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	sent     atomic.Int64
	unsent   atomic.Int64 // due before the run ended, never added (Result.Unsent)
	service  atomic.Int64 // ns, a moving average of the answers' service time
	busy     func() bool  // whether the pipes should poll rather than sleep
	dialPipe func(context.Context, *transport.Endpoint, transport.Options, func() bool) (pipe, error)

	mu         sync.Mutex // res, interval, lastAnswer
	lastAnswer int64
	interval   *hdrhistogram.Histogram

	rmu     sync.Mutex // losses, readErr, leanConn.lossNoted
	readErr error
	losses  []error // what ended connections mid-run, one per loss

	readers     sync.WaitGroup
	stopReading chan struct{} // closed when the run closes its pipes itself
	sweepDone   chan struct{}
}

// doneQ is a query that ended: answered (status with a response) or
// failed, at ns since the start.
type doneQ struct {
	f      flight
	at     int64
	status transport.Status
	rcode  int // noRcode without an answer
}

// newLeanRun packs the query mix and draws the order queries take it in.
func newLeanRun(c Config, res *Result) (*leanRun, error) {
	ep, err := transport.ParseURL(c.URL)
	if err != nil {
		return nil, err
	}
	res.Protocol = ep.Protocol
	r := &leanRun{c: c, res: res, ep: ep, conns: make([]*leanConn, c.Conns), timeout: c.Options.Timeout.Nanoseconds(),
		global: make(chan struct{}, c.MaxInFlight), interval: newHist(), stopReading: make(chan struct{}), sweepDone: make(chan struct{}), dialPipe: dialPipe}
	r.mix = make([][]byte, len(c.Names))
	for i, q := range c.Names {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(q.Name), q.Type)
		m.Id = 0
		if r.mix[i], err = m.Pack(); err != nil {
			return nil, fmt.Errorf("packing %s: %w", q.Name, err)
		}
	}
	rng := rand.New(rand.NewPCG(c.Seed, 2))
	r.order = make([]int, min(c.MaxQueries, 1<<20))
	for i := range r.order {
		r.order[i] = rng.IntN(len(r.mix))
	}
	if !c.NoBusyPoll {
		r.busy = func() bool { return r.inFlight.Load()*2 >= int64(c.MaxInFlight) }
	}
	return r, nil
}

// dial opens the run's connections, recording each handshake.
func (r *leanRun) dial(ctx context.Context) error {
	for i := range r.conns {
		t0 := time.Now()
		p, err := r.dialPipe(ctx, r.ep, r.c.Options, r.busy)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		r.res.Handshake.RecordValue(max(1, time.Since(t0).Microseconds()))
		r.conns[i] = newLeanConn(p)
	}
	return nil
}

func newLeanConn(p pipe) *leanConn {
	lc := &leanConn{p: p, free: make(chan struct{}, min(p.limit(), 65535))}
	for range cap(lc.free) {
		lc.free <- struct{}{}
	}
	return lc
}

func (r *leanRun) closeAll() {
	for _, lc := range r.conns {
		if lc != nil {
			lc.p.close()
		}
	}
}

// now is the time since the start, in ns.
func (r *leanRun) now() int64 { return time.Since(r.start).Nanoseconds() }

// finish records a batch of queries that ended.
func (r *leanRun) finish(batch []doneQ) {
	if len(batch) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	svc := r.service.Load()
	defer func() { r.service.Store(svc) }()
	for _, d := range batch {
		rcode := rcodeName(d.rcode)
		if r.c.Keep {
			r.res.Samples = append(r.res.Samples, Sample{At: time.Duration(d.f.due), Latency: time.Duration(d.at - d.f.due),
				Service: time.Duration(d.at - d.f.sent), Status: d.status, Rcode: rcode})
		}
		if !r.res.count(d.status, rcode) {
			continue
		}
		r.lastAnswer = max(r.lastAnswer, d.at)
		lat := max(1, (d.at-d.f.due)/1000)
		r.res.Latency.RecordValue(lat)
		r.res.Service.RecordValue(max(1, (d.at-d.f.sent)/1000))
		svc += (d.at - d.f.sent - svc) / 16
		r.interval.RecordValue(lat)
	}
}

// answered gives back the room a query of lc held. inFlight drops
// first, so that it never counts more queries than the window holds.
func (r *leanRun) answered(lc *leanConn) {
	r.inFlight.Add(-1)
	lc.free <- struct{}{}
	<-r.global
}

// sweep times out what stays unanswered, so that lost datagrams give
// their room back, until sweepDone is closed.
func (r *leanRun) sweep() {
	t := time.NewTicker(min(r.c.Options.Timeout/5, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.sweepDone:
			return
		case <-t.C:
		}
		r.timeOut(r.now())
	}
}

// timeOut ends the queries in flight longer than the timeout at now.
func (r *leanRun) timeOut(now int64) {
	var batch []doneQ
	for _, lc := range r.conns {
		lc.mu.Lock()
		for s, f := range lc.slots {
			if f.sent != 0 && now-f.sent > r.timeout {
				lc.slots[s] = flight{}
				batch = append(batch, doneQ{f, now, transport.StatusTimeout, noRcode})
			}
		}
		lc.mu.Unlock()
		for range batch {
			r.answered(lc)
		}
		r.finish(batch)
		batch = batch[:0]
	}
}

// noteLoss notes once why lc's current pipe ended.
func (r *leanRun) noteLoss(lc *leanConn, err error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if !lc.lossNoted {
		lc.lossNoted = true
		r.readErr = err
		r.losses = append(r.losses, err)
	}
}

// startReader matches the answers on lc's pipe to its slots until the
// pipe ends, and then closes lc.dead.
func (r *leanRun) startReader(lc *leanConn) {
	p, dead := lc.p, make(chan struct{})
	lc.dead = dead
	r.readers.Go(func() {
		defer close(dead)
		var batch []doneQ
		err := p.read(func(slot uint16, st transport.Status, rcode int) {
			if d, ok := r.match(lc, slot, st, rcode, r.now()); ok {
				batch = append(batch, d)
				r.answered(lc)
			}
			if len(batch) >= 64 {
				r.finish(batch)
				batch = batch[:0]
			}
		})
		r.finish(batch)
		select {
		case <-r.stopReading: // closed on purpose
		default:
			if err != nil {
				r.noteLoss(lc, err)
			}
		}
	})
}

// match takes the query in an answer's slot out of lc's flights. An
// answer for a free slot (unknown, late after a timeout, a duplicate)
// matches nothing; one past the timeout counts as timed out.
func (r *leanRun) match(lc *leanConn, slot uint16, st transport.Status, rcode int, now int64) (doneQ, bool) {
	lc.mu.Lock()
	f := lc.slots[slot]
	lc.slots[slot] = flight{}
	lc.mu.Unlock()
	if f.sent == 0 {
		return doneQ{}, false
	}
	if now-f.sent > r.timeout {
		st, rcode = transport.StatusTimeout, noRcode
	}
	return doneQ{f, now, st, rcode}, true
}

// failInFlight ends what lc had in flight on a pipe that is gone, at
// once rather than at the timeout, so that it gives its room back:
// status closed. The queries of keep, a batch not yet written, stay.
func (r *leanRun) failInFlight(lc *leanConn, keep []uint32) {
	now := r.now()
	held := make([]flight, len(keep))
	var gone []doneQ
	lc.mu.Lock()
	for i, s := range keep {
		held[i], lc.slots[uint16(s)] = lc.slots[uint16(s)], flight{}
	}
	for s, f := range lc.slots {
		if f.sent != 0 {
			gone = append(gone, doneQ{f, now, transport.StatusClosed, noRcode})
			lc.slots[s] = flight{}
		}
	}
	for i, s := range keep {
		lc.slots[uint16(s)] = held[i]
	}
	lc.mu.Unlock()
	for range gone {
		r.answered(lc)
	}
	r.finish(gone)
}

// drain waits for the answers in flight, up to the timeout; what a
// connection lost by now had in flight will not come.
func (r *leanRun) drain() {
	deadline := time.Now().Add(r.c.Options.Timeout)
	for r.inFlight.Load() > 0 && time.Now().Before(deadline) {
		for _, lc := range r.conns {
			select {
			case <-lc.dead:
				r.failInFlight(lc, nil)
			default:
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// stopReaders closes the pipes and waits for their readers; what is
// still in flight then timed out.
func (r *leanRun) stopReaders() {
	close(r.stopReading)
	for _, lc := range r.conns {
		lc.p.close()
	}
	r.readers.Wait()
	var lost []doneQ
	for _, lc := range r.conns {
		for s := range lc.slots {
			if f := lc.slots[s]; f.sent != 0 {
				lost = append(lost, doneQ{f, r.now(), transport.StatusTimeout, noRcode})
			}
		}
	}
	r.finish(lost)
}

// summarize fills in the result's rates and why connections ended.
func (r *leanRun) summarize(sendEnd time.Time) error {
	res := r.res
	res.Elapsed = time.Since(r.start)
	res.Achieved = float64(res.Sent) / max(sendEnd.Sub(r.start), time.Millisecond).Seconds()
	// Answers per second until the last: the wait for the lost ones
	// does not dilute the rate.
	res.Answered = float64(res.OK) / max(time.Duration(r.lastAnswer), time.Millisecond).Seconds()
	res.MaxInFlightObserved = int(r.maxSeen.Load())
	for _, err := range r.losses {
		if res.ConnErrors == nil {
			res.ConnErrors = map[string]int{}
		}
		res.ConnErrors[connLost(err)]++
	}
	if r.readErr != nil && res.OK == 0 {
		return fmt.Errorf("no answers; the connection ended: %w", r.readErr)
	}
	return nil
}

// sender writes one connection's share of the schedule: query i
// (i ≡ k mod the number of connections) is due at start + i/Rate. It
// gathers due queries into a batch and writes it when it would wait
// (for a due time or for room) or when the batch is full.
type sender struct {
	r          *leanRun
	ctx        context.Context
	k          int
	lc         *leanConn
	seqs       []uint32 // the batch not yet written: its sequence numbers,
	qs         [][]byte // its messages,
	bufs       [][]byte // and their buffers, reused
	seq        uint32
	batchStart time.Time
	revivals   int
}

func (r *leanRun) newSender(ctx context.Context, k int, lc *leanConn) *sender {
	return &sender{r: r, ctx: ctx, k: k, lc: lc, seqs: make([]uint32, 0, 64), qs: make([][]byte, 0, 64), bufs: make([][]byte, 64)}
}

func (s *sender) run() {
	r := s.r
	n := len(r.conns)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// stop counts, when the sender stops early, the queries of its share
	// from the first it never added that were due by then (Unsent).
	stop := func(from int) { r.unsent.Add(int64(dueBefore(from, n, r.c, time.Since(r.start)))) }
	for i := s.k; i < r.c.MaxQueries; i += n {
		due, ok := dueAt(i, r.c.Rate, r.c.Duration)
		if !ok {
			break
		}
		if wait := time.Until(r.start.Add(due)); wait > 0 {
			if !s.flush() {
				stop(i)
				return
			}
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-r.interrupted:
				stop(i)
				return
			}
		}
		if !s.takeRoom() {
			stop(i)
			return
		}
		s.add(i, due)
		if len(s.seqs) == cap(s.seqs) && !s.flush() {
			stop(i + n)
			return
		}
	}
	s.flush()
}

// takeRoom takes room for one query on the connection and in the
// window; beyond, the schedule waits and the wait counts in the
// latency. A connection lost meanwhile is replaced, which gives back
// the room its queries held. False: the run is over.
func (s *sender) takeRoom() bool {
	r, lc := s.r, s.lc
	for took := false; !took; {
		select {
		case <-lc.free:
			took = true
			continue
		default:
		}
		if !s.flush() {
			return false
		}
		select {
		case <-lc.free:
			took = true
		case <-lc.dead:
			if !s.revive() {
				return false
			}
		case <-s.ctx.Done():
			return false
		}
	}
	for took := false; !took; {
		select {
		case r.global <- struct{}{}:
			took = true
			continue
		default:
		}
		if len(s.seqs) > 0 && roomSoon(r.global, s.batchStart.Add(time.Duration(r.service.Load()/roomShare))) {
			took = true
			continue
		}
		if !s.flush() {
			return false
		}
		select {
		case r.global <- struct{}{}:
			took = true
		case <-lc.dead:
			if !s.revive() {
				return false
			}
		case <-s.ctx.Done():
			return false
		}
	}
	return true
}

// add puts query i, due at due, into its slot and the batch. A query
// still unanswered in the slot when its ID comes round again is lost,
// as dnsperf counts it.
func (s *sender) add(i int, due time.Duration) {
	r, lc := s.r, s.lc
	now := r.now()
	slot := uint16(s.seq)
	lc.mu.Lock()
	old := lc.slots[slot]
	lc.slots[slot] = flight{due: int64(due), sent: max(1, now)}
	lc.mu.Unlock()
	if old.sent != 0 {
		r.finish([]doneQ{{old, now, transport.StatusTimeout, noRcode}})
		r.answered(lc)
	}
	b := s.bufs[len(s.qs)][:0]
	b = append(b, r.mix[r.order[(i/len(r.conns))%len(r.order)]]...)
	s.bufs[len(s.qs)] = b
	if len(s.seqs) == 0 {
		s.batchStart = time.Now()
	}
	s.seqs, s.qs = append(s.seqs, s.seq), append(s.qs, b)
	s.seq++
	for v := r.inFlight.Add(1); ; {
		if m := r.maxSeen.Load(); v <= m || r.maxSeen.CompareAndSwap(m, v) {
			break
		}
	}
	r.sent.Add(1)
}

// flush writes the batch, replacing the connection if the server ended
// it. False: the connection is gone and could not be replaced.
func (s *sender) flush() bool {
	r, lc := s.r, s.lc
	for len(s.seqs) > 0 {
		select {
		case <-lc.dead:
			if !s.revive() {
				return false
			}
		default:
		}
		// The service time counts from the write, not from when the
		// query joined the batch.
		now := max(1, r.now())
		lc.mu.Lock()
		for _, q := range s.seqs {
			lc.slots[uint16(q)].sent = now
		}
		lc.mu.Unlock()
		err := lc.p.write(s.seqs, s.qs)
		if err == nil {
			s.seqs, s.qs = s.seqs[:0], s.qs[:0]
			break
		}
		r.noteLoss(lc, err)
		if !s.revive() {
			return false
		}
	}
	return true
}

// revive replaces a connection the server ended, as dnsperf
// reconnects: what it had in flight is lost (closed), and the batch not
// yet written goes on the new one. It says whether there is a new one.
func (s *sender) revive() bool {
	r, lc := s.r, s.lc
	lc.p.close()
	<-lc.dead // its reader is done with the slots
	r.failInFlight(lc, s.seqs)
	var p pipe
	err := errTooManyRevivals
	t0 := time.Now()
	if s.revivals < maxRevivals {
		p, err = r.dialPipe(s.ctx, r.ep, r.c.Options, r.busy)
	}
	if err != nil {
		if s.ctx.Err() == nil {
			r.rmu.Lock()
			r.losses = append(r.losses, fmt.Errorf("reconnecting: %w", err))
			r.rmu.Unlock()
		}
		r.failInFlight(lc, nil)
		s.seqs, s.qs = s.seqs[:0], s.qs[:0]
		return false
	}
	s.revivals++
	r.mu.Lock()
	r.res.Handshake.RecordValue(max(1, time.Since(t0).Microseconds()))
	r.res.Reconnects++
	r.mu.Unlock()
	r.rmu.Lock()
	lc.lossNoted = false
	r.rmu.Unlock()
	lc.p = p
	r.startReader(lc)
	return true
}

// roomShare: a sender with queries to write waits for room in a full
// window up to this share of the service time, counted from its batch's
// first query (roomSoon).
const roomShare = 8

// roomSoon takes room in a full window, yielding to the other goroutines
// until a reader frees some or until passes, and says whether it got it.
// Each answer frees room for one query: writing each query alone costs
// the generator and the server a segment and a wakeup per query, and
// waiting a little lets answers already on their way free room for a
// batch. How long is a share of the service time: Knot Resolver's DoH,
// answering in three segments, gave 46-62k answers/s without the wait
// and 66-68k after 200 µs (its service time ~1.7 ms), where doxlab
// serve's DoT, whose service time is 0.18 ms, fell from 473k to 260k
// with 200 µs. The wait ends at a time, not at some number of queries
// gathered: tried that way, Unbound's TCP and DoT answered in 31-37 ms
// instead of 0.7, the timescale of a delayed ACK, as if its next answer
// waited on an ACK our next query would have carried (Nagle).
func roomSoon(window chan struct{}, until time.Time) bool {
	for time.Now().Before(until) {
		runtime.Gosched()
		select {
		case window <- struct{}{}:
			return true
		default:
		}
	}
	return false
}

// connLost says why a connection ended, without its addresses, so that
// connections lost alike count together.
func connLost(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}

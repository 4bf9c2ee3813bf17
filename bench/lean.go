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
	// goroutine: the seq's low 16 bits, and how it ended (answerStatus).
	read(got func(slot uint16, st transport.Status)) error
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
	ep, err := transport.ParseURL(c.URL)
	if err != nil {
		return err
	}
	res.Protocol = ep.Protocol
	// The query mix, packed once.
	mix := make([][]byte, len(c.Names))
	for i, q := range c.Names {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(q.Name), q.Type)
		m.Id = 0
		if mix[i], err = m.Pack(); err != nil {
			return fmt.Errorf("packing %s: %w", q.Name, err)
		}
	}
	conns := make([]*leanConn, c.Conns)
	defer func() {
		for _, lc := range conns {
			if lc != nil {
				lc.p.close()
			}
		}
	}()
	var inFlight atomic.Int64
	var busy func() bool
	if !c.NoBusyPoll {
		busy = func() bool { return inFlight.Load()*2 >= int64(c.MaxInFlight) }
	}
	for i := range conns {
		t0 := time.Now()
		p, err := dialPipe(ctx, ep, c.Options, busy)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		res.Handshake.RecordValue(max(1, time.Since(t0).Microseconds()))
		lc := &leanConn{p: p, free: make(chan struct{}, min(p.limit(), 65535))}
		for range cap(lc.free) {
			lc.free <- struct{}{}
		}
		conns[i] = lc
	}

	sweepDone := make(chan struct{})
	var (
		mu         sync.Mutex // res, interval, lastAnswer
		lastAnswer int64
		interval   = newHist()
		maxSeen    atomic.Int64
		service    atomic.Int64 // ns, a moving average of the answers' service time
		sent       atomic.Int64
		global     = make(chan struct{}, c.MaxInFlight)
	)
	start := time.Now()
	res.Start = start
	end := start.Add(c.Duration)
	timeout := c.Options.Timeout.Nanoseconds()
	// done ends a batch of queries: answered (lat ≥ 0) or failed.
	type doneQ struct {
		f      flight
		at     int64
		status transport.Status
	}
	finish := func(batch []doneQ) {
		if len(batch) == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		svc := service.Load()
		defer func() { service.Store(svc) }()
		for _, d := range batch {
			if c.Keep {
				res.Samples = append(res.Samples, Sample{At: time.Duration(d.f.due), Latency: time.Duration(d.at - d.f.due),
					Service: time.Duration(d.at - d.f.sent), Status: d.status})
			}
			if !d.status.HasResponse() {
				res.Errors[d.status]++
				continue
			}
			res.OK++
			lastAnswer = max(lastAnswer, d.at)
			lat := max(1, (d.at-d.f.due)/1000)
			res.Latency.RecordValue(lat)
			res.Service.RecordValue(max(1, (d.at-d.f.sent)/1000))
			svc += (d.at - d.f.sent - svc) / 16
			interval.RecordValue(lat)
		}
	}
	// A query takes a token of its connection's room (free) and puts one
	// into global, which holds MaxInFlight at most; its answer, its
	// timeout or its connection's loss gives them back. inFlight drops
	// first, so that it never counts more queries than the window holds.
	answered := func(lc *leanConn) {
		inFlight.Add(-1)
		lc.free <- struct{}{}
		<-global
	}

	// Waiting for a query's due time ends only when the caller cancels
	// (interrupted): a query due before the end is sent however late the
	// timer fires. Waiting for room ends at the end too.
	interrupted := ctx.Done()
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if c.Progress != nil {
		stop := reportProgress(ctx, c, start, func(p *Progress) {
			mu.Lock()
			defer mu.Unlock()
			p.snapshot(int(sent.Load()), res, interval)
		})
		defer stop()
	}

	// The sweeper times out what stays unanswered, so that lost
	// datagrams give their room back.
	var sweeper sync.WaitGroup
	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		t := time.NewTicker(min(c.Options.Timeout/5, 100*time.Millisecond))
		defer t.Stop()
		var batch []doneQ
		for {
			select {
			case <-sweepDone:
				return
			case <-t.C:
			}
			now := time.Since(start).Nanoseconds()
			for _, lc := range conns {
				lc.mu.Lock()
				for s, f := range lc.slots {
					if f.sent != 0 && now-f.sent > timeout {
						lc.slots[s] = flight{}
						batch = append(batch, doneQ{f, now, transport.StatusTimeout})
					}
				}
				lc.mu.Unlock()
				for range batch {
					answered(lc)
				}
				finish(batch)
				batch = batch[:0]
			}
		}
	}()

	var rmu sync.Mutex // losses, readErr, leanConn.lossNoted
	var readErr error
	var losses []error // what ended connections mid-run, one per loss
	// noteLoss notes once why lc's current pipe ended.
	noteLoss := func(lc *leanConn, err error) {
		rmu.Lock()
		defer rmu.Unlock()
		if !lc.lossNoted {
			lc.lossNoted = true
			readErr = err
			losses = append(losses, err)
		}
	}
	var wg, readers sync.WaitGroup
	stopReading := make(chan struct{})

	// startReader matches the answers on lc's pipe to its slots until
	// the pipe ends, and then closes lc.dead.
	startReader := func(lc *leanConn) {
		p, dead := lc.p, make(chan struct{})
		lc.dead = dead
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer close(dead)
			var batch []doneQ
			err := p.read(func(slot uint16, st transport.Status) {
				now := time.Since(start).Nanoseconds()
				lc.mu.Lock()
				f := lc.slots[slot]
				lc.slots[slot] = flight{}
				lc.mu.Unlock()
				if f.sent == 0 {
					return // unknown, late after a timeout, or a duplicate
				}
				if now-f.sent > timeout {
					st = transport.StatusTimeout
				}
				batch = append(batch, doneQ{f, now, st})
				answered(lc)
				if len(batch) >= 64 {
					finish(batch)
					batch = batch[:0]
				}
			})
			finish(batch)
			select {
			case <-stopReading: // closed on purpose
			default:
				if err != nil {
					noteLoss(lc, err)
				}
			}
		}()
	}
	// failInFlight ends what lc had in flight on a pipe that is gone, at
	// once rather than at the timeout, so that it gives its room back:
	// status closed. The queries of keep, a batch not yet written, stay.
	failInFlight := func(lc *leanConn, keep []uint32) {
		now := time.Since(start).Nanoseconds()
		held := make([]flight, len(keep))
		var gone []doneQ
		lc.mu.Lock()
		for i, s := range keep {
			held[i], lc.slots[uint16(s)] = lc.slots[uint16(s)], flight{}
		}
		for s, f := range lc.slots {
			if f.sent != 0 {
				gone = append(gone, doneQ{f, now, transport.StatusClosed})
				lc.slots[s] = flight{}
			}
		}
		for i, s := range keep {
			lc.slots[uint16(s)] = held[i]
		}
		lc.mu.Unlock()
		for range gone {
			answered(lc)
		}
		finish(gone)
	}
	for _, lc := range conns {
		startReader(lc)
	}

	n := len(conns)
	interval64 := float64(time.Second) / c.Rate
	rng := rand.New(rand.NewPCG(c.Seed, 2))
	order := make([]int, min(c.MaxQueries, 1<<20))
	for i := range order {
		order[i] = rng.IntN(len(mix))
	}
	for k, lc := range conns {
		// Sender: query i (i ≡ k mod n) is due at start + i/Rate.
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs := make([]uint32, 0, 64)
			qs := make([][]byte, 0, 64)
			bufs := make([][]byte, 64)
			var seq uint32
			var batchStart time.Time
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			// revive replaces a connection the server ended, as dnsperf
			// reconnects: what it had in flight is lost (closed), and
			// the batch not yet written goes on the new one. It says
			// whether there is a new one.
			revivals := 0
			revive := func() bool {
				lc.p.close()
				<-lc.dead // its reader is done with the slots
				failInFlight(lc, seqs)
				var p pipe
				err := errTooManyRevivals
				t0 := time.Now()
				if revivals < maxRevivals {
					p, err = dialPipe(ctx, ep, c.Options, busy)
				}
				if err != nil {
					if ctx.Err() == nil {
						rmu.Lock()
						losses = append(losses, fmt.Errorf("reconnecting: %w", err))
						rmu.Unlock()
					}
					failInFlight(lc, nil)
					seqs, qs = seqs[:0], qs[:0]
					return false
				}
				revivals++
				mu.Lock()
				res.Handshake.RecordValue(max(1, time.Since(t0).Microseconds()))
				res.Reconnects++
				mu.Unlock()
				rmu.Lock()
				lc.lossNoted = false
				rmu.Unlock()
				lc.p = p
				startReader(lc)
				return true
			}
			flush := func() bool {
				for len(seqs) > 0 {
					select {
					case <-lc.dead:
						if !revive() {
							return false
						}
					default:
					}
					// The service time counts from the write, not from
					// when the query joined the batch.
					now := max(1, time.Since(start).Nanoseconds())
					lc.mu.Lock()
					for _, s := range seqs {
						lc.slots[uint16(s)].sent = now
					}
					lc.mu.Unlock()
					err := lc.p.write(seqs, qs)
					if err == nil {
						seqs, qs = seqs[:0], qs[:0]
						break
					}
					noteLoss(lc, err)
					if !revive() {
						return false
					}
				}
				return true
			}
			for i := k; i < c.MaxQueries; i += n {
				due := time.Duration(float64(i) * interval64)
				if !start.Add(due).Before(end) {
					break
				}
				if wait := time.Until(start.Add(due)); wait > 0 {
					if !flush() {
						return
					}
					timer.Reset(wait)
					select {
					case <-timer.C:
					case <-interrupted:
						return
					}
				}
				// Room on this connection and in all: beyond, the
				// schedule waits and the wait counts in the latency. A
				// connection lost meanwhile is replaced, which gives
				// back the room its queries held.
				for took := false; !took; {
					select {
					case <-lc.free:
						took = true
						continue
					default:
					}
					if !flush() {
						return
					}
					select {
					case <-lc.free:
						took = true
					case <-lc.dead:
						if !revive() {
							return
						}
					case <-ctx.Done():
						return
					}
				}
				for took := false; !took; {
					select {
					case global <- struct{}{}:
						took = true
						continue
					default:
					}
					if len(seqs) > 0 && roomSoon(global, batchStart.Add(time.Duration(service.Load()/roomShare))) {
						took = true
						continue
					}
					if !flush() {
						return
					}
					select {
					case global <- struct{}{}:
						took = true
					case <-lc.dead:
						if !revive() {
							return
						}
					case <-ctx.Done():
						return
					}
				}
				now := time.Since(start).Nanoseconds()
				slot := uint16(seq)
				lc.mu.Lock()
				old := lc.slots[slot]
				lc.slots[slot] = flight{due: int64(due), sent: max(1, now)}
				lc.mu.Unlock()
				if old.sent != 0 {
					// Unanswered when its ID came round again: lost, as
					// dnsperf counts it.
					finish([]doneQ{{old, now, transport.StatusTimeout}})
					answered(lc)
				}
				b := bufs[len(qs)][:0]
				b = append(b, mix[order[(i/n)%len(order)]]...)
				bufs[len(qs)] = b
				if len(seqs) == 0 {
					batchStart = time.Now()
				}
				seqs, qs = append(seqs, seq), append(qs, b)
				seq++
				for v := inFlight.Add(1); ; {
					if m := maxSeen.Load(); v <= m || maxSeen.CompareAndSwap(m, v) {
						break
					}
				}
				sent.Add(1)
				if len(seqs) == cap(seqs) && !flush() {
					return
				}
			}
			flush()
		}()
	}
	wg.Wait()
	sendEnd := time.Now()
	res.Sent = int(sent.Load())
	// Wait for the answers in flight, up to the timeout; then sweep.
	// What a connection lost by now had in flight will not come.
	deadline := time.Now().Add(c.Options.Timeout)
	for inFlight.Load() > 0 && time.Now().Before(deadline) {
		for _, lc := range conns {
			select {
			case <-lc.dead:
				failInFlight(lc, nil)
			default:
			}
		}
		time.Sleep(time.Millisecond)
	}
	close(sweepDone)
	sweeper.Wait()
	close(stopReading)
	for _, lc := range conns {
		lc.p.close()
	}
	readers.Wait()
	var lost []doneQ
	for _, lc := range conns {
		for s := range lc.slots {
			if f := lc.slots[s]; f.sent != 0 {
				lost = append(lost, doneQ{f, time.Since(start).Nanoseconds(), transport.StatusTimeout})
			}
		}
	}
	finish(lost)
	res.Elapsed = time.Since(start)
	res.Achieved = float64(res.Sent) / max(sendEnd.Sub(start), time.Millisecond).Seconds()
	// Answers per second until the last: the wait for the lost ones
	// does not dilute the rate.
	res.Answered = float64(res.OK) / max(time.Duration(lastAnswer), time.Millisecond).Seconds()
	res.MaxInFlightObserved = int(maxSeen.Load())
	for _, err := range losses {
		if res.ConnErrors == nil {
			res.ConnErrors = map[string]int{}
		}
		res.ConnErrors[connLost(err)]++
	}
	if readErr != nil && res.OK == 0 {
		return fmt.Errorf("no answers; the connection ended: %w", readErr)
	}
	return nil
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

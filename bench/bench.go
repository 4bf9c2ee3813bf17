// Package bench loads a DNS server over any transport, open loop by
// default: every query has an intended send time on a fixed schedule, and
// its latency counts from that time, so a server that stalls shows up as
// latency, not as a slower rate (the coordinated omission wrk2 corrects).
// A closed-loop mode, workers sending back to back, is there to compare.
// Latencies go into HDR histograms (hdrhistogram-go) per phase.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// Config is one benchmark run against one server URL.
type Config struct {
	URL string
	// Rate is the intended queries per second, open loop. Zero runs
	// closed loop with Workers.
	Rate     float64
	Workers  int           // closed loop: each sends its next query when its last is answered; default 1
	Duration time.Duration // how long to send; default 10 s
	// MaxQueries bounds the run (default Rate × Duration, or 1,000,000
	// closed loop); MaxInFlight bounds the queries waiting for an answer
	// (default 10,000): beyond it the schedule waits, and the wait counts
	// in the latency.
	MaxQueries, MaxInFlight int
	// Conns is how many connections carry the queries, round robin; each
	// is reused (pipelined on TCP and TLS, streams on QUIC) unless
	// Options.Reuse is off, when every query opens its own.
	Conns   int
	Names   []Query // the query mix, drawn at random; default one name
	Options transport.Options
	Seed    uint64
	// Keep keeps every query's Sample in Result.Samples, for the store.
	Keep bool
	// Answers says which rcodes answer (zero: NOERROR and NXDOMAIN):
	// only those are timed, the others count as failures by rcode.
	Answers measure.Answers
	// Full sends every query through the transport's Exchange, with its
	// full record, also where the lean path (Lean) would go.
	Full bool
	// NoBusyPoll lets the lean path's UDP, TCP and TLS readers sleep whenever
	// their socket is empty. By default, while at least half of
	// MaxInFlight awaits answers, they poll a little first (pollWhile):
	// a saturated server then need not wake an idle generator per answer.
	NoBusyPoll bool
	// Progress, if set, is called every ProgressEvery (default 1 s) while
	// the run sends, from its own goroutine.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// StepDone, if set, is called by Steps after each step.
	StepDone func(Step)
}

// Query is one entry of the query mix.
type Query struct {
	Name string
	Type uint16
}

// Result is what a run measured.
type Result struct {
	URL      string
	Protocol string    // as the transport's records name it: udp, doh2, ...
	Start    time.Time // wall clock; Sample.At counts from it
	OpenLoop bool
	Intended float64 // queries per second asked for (open loop)
	Achieved float64 // queries sent per second
	Answered float64 // answers per second
	// OK counts the queries answered with an rcode Config.Answers takes;
	// Errors the others, by what they failed with: an rcode not taken
	// (REFUSED), or a status (timeout, ...). Rcodes counts every answer
	// by its rcode, taken or not, as dnsperf's "Response codes" do.
	Sent, OK int
	// Unsent counts the queries of an open loop due before the run ended
	// (its duration, or an interruption) that were never sent: no room
	// (MaxInFlight out, or a connection's window full) until the end, or
	// no connection left. A server that answers too slowly shows here, as
	// achieved below intended.
	Unsent int
	Errors map[string]int
	Rcodes map[string]int
	// OKRcodes are the rcodes taken as answers.
	OKRcodes []string
	answers  measure.Answers
	// ConnErrors are the connections that ended mid-run (lean path), by
	// the error that ended them (a server's GOAWAY, a reset, EOF): their
	// queries in flight end as closed, and this says why. Reconnects
	// counts the connections opened to replace them.
	ConnErrors          map[string]int
	Reconnects          int
	Elapsed             time.Duration
	CPUUser, CPUSys     time.Duration           // this process's
	Latency             *hdrhistogram.Histogram // µs; open loop from the intended send time, closed loop from the call
	Service             *hdrhistogram.Histogram // µs; from the call: what the server and the link took
	Handshake           *hdrhistogram.Histogram // µs; of exchanges that opened a connection
	MaxInFlightObserved int
	Samples             []Sample // with Config.Keep, in completion order
}

// count counts how a query ended, by its status and its answer's rcode
// ("" without one), and says whether it answered.
func (r *Result) count(st transport.Status, rcode string) bool {
	if rcode != "" {
		r.Rcodes[rcode]++
	}
	if o := r.answers.Outcome(st, rcode); o != "" {
		r.Errors[o]++
		return false
	}
	r.OK++
	return true
}

// rcodeName is an rcode's name, "" for noRcode.
func rcodeName(rcode int) string {
	if rcode == noRcode {
		return ""
	}
	if n, ok := dns.RcodeToString[rcode]; ok {
		return n
	}
	return strconv.Itoa(rcode)
}

// Sample is one query of a run.
type Sample struct {
	At        time.Duration    // since the start: the intended send time, or in closed loop the call
	Latency   time.Duration    // At -> answer, or -> failure
	Service   time.Duration    // the call -> answer, or -> failure
	Handshake time.Duration    // 0 when an open connection carried the query
	Status    transport.Status // ok, timeout, ...
	Rcode     string           // the answer's, "" without one
	Resumed   bool             // the connection resumed a TLS session
	ZeroRTT   bool             // the query went as 0-RTT early data, accepted
}

// Progress is a run's state while it sends.
type Progress struct {
	Elapsed          time.Duration
	Sent, OK, Failed int
	InFlight         int
	Answered         float64       // answers per second since the last report
	P50, P99         time.Duration // latency of the answers since the last report
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Conns <= 0 {
		c.Conns = 1
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 10000
	}
	if c.MaxQueries <= 0 {
		c.MaxQueries = 1_000_000
		if c.Rate > 0 {
			c.MaxQueries = int(c.Rate*c.Duration.Seconds()) + 1
		}
	}
	if len(c.Names) == 0 {
		c.Names = []Query{{"bench.example.", dns.TypeA}}
	}
	if c.Options.Timeout <= 0 {
		c.Options.Timeout = transport.DefaultTimeout
	}
}

// Check rejects a config no run can mean, before anything is sent.
func (c *Config) Check() error {
	for _, f := range []struct {
		name string
		neg  bool
	}{{"duration", c.Duration < 0}, {"timeout", c.Options.Timeout < 0}, {"workers", c.Workers < 0},
		{"conns", c.Conns < 0}, {"max-in-flight", c.MaxInFlight < 0}, {"max-queries", c.MaxQueries < 0}} {
		if f.neg {
			return fmt.Errorf("%s must not be negative (0: the default)", f.name)
		}
	}
	switch {
	case !(c.Rate >= 0): // NaN too
		return errors.New("rate must be a number, 0 or more")
	case c.Rate > MaxRate:
		return fmt.Errorf("rate %.0f/s is more than any server here can take", c.Rate)
	case c.Conns > 10000:
		return fmt.Errorf("%d connections is more than a benchmark of one server needs", c.Conns)
	case c.Workers > 10000:
		// A closed loop's senders each hold a query: a typo's million
		// started a million goroutines sending at once.
		return fmt.Errorf("%d workers is more than a benchmark of one server needs", c.Workers)
	case c.Duration > 24*time.Hour:
		return errors.New("duration over a day")
	}
	return nil
}

// MaxRate is the highest open-loop rate, queries a second: more than any
// server here can take.
const MaxRate = 10_000_000

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, 60_000_000, 3) // 1 µs to 60 s, 3 significant digits
}

// Run runs the benchmark until Duration, MaxQueries or ctx ends it, then
// waits for the answers in flight (up to the timeout).
func Run(ctx context.Context, c Config) (*Result, error) {
	c.defaults()
	if err := c.Check(); err != nil {
		return nil, err
	}
	if Lean(c) {
		res := newResult(c, true)
		cpu0 := cpuTimes()
		if err := runLean(ctx, c, res); err != nil {
			return nil, err
		}
		cpu1 := cpuTimes()
		res.CPUUser, res.CPUSys = cpu1.user-cpu0.user, cpu1.sys-cpu0.sys
		return res, nil
	}
	trs := make([]transport.Transport, c.Conns)
	for i := range trs {
		tr, err := transport.New(c.URL, c.Options)
		if err != nil {
			for _, t := range trs[:i] {
				t.Close()
			}
			return nil, err
		}
		trs[i] = tr
	}
	defer func() {
		for _, t := range trs {
			t.Close()
		}
	}()
	r := &fullRun{c: c, trs: trs, res: newResult(c, c.Rate > 0), interval: newHist(), rng: rand.New(rand.NewPCG(c.Seed, 1))}
	res := r.res
	cpu0 := cpuTimes()
	r.start = time.Now()
	res.Start = r.start
	end := r.start.Add(c.Duration)
	interrupted := ctx.Done() // as on the lean path: a query due before the end is sent
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if c.Progress != nil {
		stop := reportProgress(ctx, c, r.start, func(p *Progress) {
			r.mu.Lock()
			defer r.mu.Unlock()
			p.snapshot(res.Sent, res, r.interval)
		})
		defer stop()
	}
	if c.Rate > 0 {
		if i := r.openLoop(ctx, interrupted); i >= 0 {
			res.Unsent = dueBefore(i, 1, c, time.Since(r.start))
		}
	} else {
		r.closedLoop(ctx)
	}
	sendEnd := time.Now()
	r.wg.Wait()
	res.Elapsed = time.Since(r.start)
	sendSpan := max(sendEnd.Sub(r.start), time.Millisecond)
	if !res.OpenLoop {
		sendSpan = max(res.Elapsed, time.Millisecond)
	}
	res.Achieved = float64(res.Sent) / sendSpan.Seconds()
	res.Answered = float64(res.OK) / res.Elapsed.Seconds()
	cpu1 := cpuTimes()
	res.CPUUser, res.CPUSys = cpu1.user-cpu0.user, cpu1.sys-cpu0.sys
	return res, nil
}

// newResult is an empty result of c's run.
func newResult(c Config, openLoop bool) *Result {
	return &Result{URL: c.URL, OpenLoop: openLoop, Intended: c.Rate, Errors: map[string]int{}, Rcodes: map[string]int{}, OKRcodes: c.Answers.Rcodes(), answers: c.Answers,
		Latency: newHist(), Service: newHist(), Handshake: newHist()}
}

// fullRun is a run over doxlab's transports, with a record per query
// (the lean path, runLean, has none).
type fullRun struct {
	c     Config
	trs   []transport.Transport
	start time.Time
	wg    sync.WaitGroup

	mu       sync.Mutex // guards res, inFlight and interval
	res      *Result
	inFlight int
	interval *hdrhistogram.Histogram // latencies since the last progress report

	rngMu sync.Mutex
	rng   *rand.Rand
}

// query is the next query, of a name drawn from the config's.
func (r *fullRun) query() *dns.Msg {
	r.rngMu.Lock()
	q := r.c.Names[r.rng.IntN(len(r.c.Names))]
	r.rngMu.Unlock()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(q.Name), q.Type)
	return m
}

// send counts a query as sent and in flight.
func (r *fullRun) send() {
	r.mu.Lock()
	r.inFlight++
	r.res.Sent++
	r.res.MaxInFlightObserved = max(r.res.MaxInFlightObserved, r.inFlight)
	r.mu.Unlock()
}

// exchange sends a query on connection i, due at intended, and records it.
func (r *fullRun) exchange(i int, intended time.Time) {
	called := time.Now()
	rec, _ := r.trs[i%len(r.trs)].Exchange(context.Background(), r.query())
	r.record(rec, intended, called, time.Now())
}

// record counts one query's outcome: latency from intended, service
// time from called.
func (r *fullRun) record(rec *transport.Record, intended, called, done time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	r.inFlight--
	st := transport.StatusError
	if rec != nil {
		st = rec.Status
		if res.Protocol == "" {
			res.Protocol = rec.Protocol
		}
	}
	lat, svc := max(1, done.Sub(intended).Microseconds()), max(1, done.Sub(called).Microseconds())
	var hs time.Duration
	if rec != nil && !rec.Conn.Reused && rec.Timing.HandshakeMs > 0 {
		hs = time.Duration(rec.Timing.HandshakeMs * float64(time.Millisecond))
	}
	rcode := ""
	if rec != nil && st.HasResponse() {
		rcode = rec.Rcode
	}
	if r.c.Keep {
		s := Sample{At: intended.Sub(r.start), Latency: done.Sub(intended), Service: done.Sub(called), Handshake: hs, Status: st, Rcode: rcode}
		if rec != nil {
			s.Resumed, s.ZeroRTT = rec.Conn.TLSResumed, rec.Conn.Used0RTT
		}
		res.Samples = append(res.Samples, s)
	}
	if !res.count(st, rcode) {
		return
	}
	res.Latency.RecordValue(lat)
	res.Service.RecordValue(svc)
	r.interval.RecordValue(lat)
	if hs > 0 {
		res.Handshake.RecordValue(max(1, hs.Microseconds()))
	}
}

// openLoop sends query i at start + i/Rate, whatever happened to the
// ones before it, until Duration, MaxQueries or interrupted; at most
// MaxInFlight are out at once.
func (r *fullRun) openLoop(ctx context.Context, interrupted <-chan struct{}) (stopped int) {
	slots := make(chan struct{}, r.c.MaxInFlight)
	for i := 0; i < r.c.MaxQueries; i++ {
		at, ok := dueAt(i, r.c.Rate, r.c.Duration)
		if !ok {
			return -1
		}
		due := r.start.Add(at)
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-interrupted:
				return i
			}
		}
		// Room now is taken first: a query whose timer fired past the
		// end (a busy machine) found both cases ready, and select's
		// coin dropped it 1 time in 2 (CI sent 399 of 400).
		select {
		case slots <- struct{}{}:
		default:
			select {
			case slots <- struct{}{}: // waits while MaxInFlight are out
			case <-ctx.Done():
				return i
			}
		}
		r.send()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.exchange(i, due)
			<-slots
		}()
	}
	return -1
}

// dueBefore counts the queries of c's open loop from, from+step, ...
// that are due before elapsed (and within the run's duration and
// MaxQueries): a sender that stopped at from never sent them.
func dueBefore(from, step int, c Config, elapsed time.Duration) int {
	within := min(elapsed, c.Duration)
	n := min(int(math.Ceil(c.Rate*within.Seconds())), c.MaxQueries) // the first not due, give or take the rounding
	for n > 0 && !isDue(n-1, c.Rate, within) {
		n--
	}
	for n < c.MaxQueries && isDue(n, c.Rate, within) {
		n++
	}
	if from >= n {
		return 0
	}
	return (n - from + step - 1) / step
}

func isDue(i int, rate float64, within time.Duration) bool {
	_, ok := dueAt(i, rate, within)
	return ok
}

// dueAt is when query i of an open loop at rate is due after the start,
// and false if that is not within the run. It is reckoned in floats: an
// interval past a Duration's 292 years (a rate of 1e-12/s) wrapped to
// the past when converted first, and every query went at once.
func dueAt(i int, rate float64, within time.Duration) (time.Duration, bool) {
	at := float64(i) * float64(time.Second) / rate
	if !(at < float64(within)) {
		return 0, false
	}
	return time.Duration(at), true
}

// closedLoop runs Workers workers, each sending its next query when its
// last is answered; latency counts from the call.
func (r *fullRun) closedLoop(ctx context.Context) {
	var next sync.Mutex
	n := 0
	for w := range r.c.Workers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for ctx.Err() == nil {
				next.Lock()
				if n >= r.c.MaxQueries {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				r.send()
				r.exchange(w, time.Now())
			}
		}()
	}
}

// snapshot fills p from a run's counts and the latencies of its
// interval, and starts the next interval. Answered and failed are the
// counters the summary reports (Result.OK and Errors), read under the
// lock that guards them; in flight is what is sent and not yet counted
// either way. Deriving failed from a separately kept in-flight count
// showed failures that never happened while answers were being counted.
func (p *Progress) snapshot(sent int, res *Result, interval *hdrhistogram.Histogram) {
	p.Sent, p.OK = sent, res.OK
	for _, n := range res.Errors {
		p.Failed += n
	}
	p.InFlight = max(0, sent-p.OK-p.Failed)
	p.P50 = time.Duration(interval.ValueAtQuantile(50)) * time.Microsecond
	p.P99 = time.Duration(interval.ValueAtQuantile(99)) * time.Microsecond
	interval.Reset()
}

// reportProgress calls c.Progress every c.ProgressEvery until ctx ends
// or stop is called, with what fill reads of the run.
func reportProgress(ctx context.Context, c Config, start time.Time, fill func(*Progress)) (stop func()) {
	every := c.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		lastOK, last := 0, start
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				p := Progress{Elapsed: now.Sub(start)}
				fill(&p)
				p.Answered = float64(p.OK-lastOK) / now.Sub(last).Seconds()
				lastOK, last = p.OK, now
				c.Progress(p)
			}
		}
	}()
	return func() { cancel(); <-done }
}

type cpu struct{ user, sys time.Duration }

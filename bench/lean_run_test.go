package bench

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/transport"
)

// memPipe is a pipe in memory for the lean path's own logic: it records
// what is written, answers each query at once (unless quiet), and fails
// its first writes when told to. The lean path against real servers is
// lean_test.go's.
type memPipe struct {
	mu         sync.Mutex
	written    []uint32
	failWrites int
	quiet      bool
	lim        int
	answers    chan uint16
	closeOnce  sync.Once
}

func newMemPipe(lim int) *memPipe { return &memPipe{lim: lim, answers: make(chan uint16, 1<<16)} }

func (m *memPipe) write(seqs []uint32, _ [][]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWrites > 0 {
		m.failWrites--
		return errors.New("write: broken pipe")
	}
	m.written = append(m.written, seqs...)
	if !m.quiet {
		for _, s := range seqs {
			m.answers <- uint16(s)
		}
	}
	return nil
}

func (m *memPipe) read(got func(uint16, transport.Status, int)) error {
	for s := range m.answers {
		got(s, transport.StatusOK, dns.RcodeSuccess)
	}
	return errors.New("EOF")
}

func (m *memPipe) limit() int { return m.lim }

func (m *memPipe) close() error {
	m.closeOnce.Do(func() { close(m.answers) })
	return nil
}

func (m *memPipe) seqs() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]uint32(nil), m.written...)
}

// testRun is a lean run over conns memPipes, started now.
func testRun(t *testing.T, c Config, pipes ...*memPipe) *leanRun {
	t.Helper()
	c.URL = "udp://127.0.0.1:53"
	c.Names = []Query{{Name: "a.example", Type: 1}}
	c.Conns = len(pipes)
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 100
	}
	if c.Options.Timeout == 0 {
		c.Options.Timeout = time.Second
	}
	if c.MaxQueries == 0 {
		c.MaxQueries = 1000
	}
	res := &Result{Errors: map[string]int{}, Rcodes: map[string]int{}, Latency: newHist(), Service: newHist(), Handshake: newHist()}
	r, err := newLeanRun(c, res)
	require.NoError(t, err)
	for i, p := range pipes {
		r.conns[i] = newLeanConn(p)
	}
	r.start = time.Now()
	r.end = r.start.Add(c.Duration)
	return r
}

// take is what a sender does before add: room on lc and in the window.
func take(r *leanRun, lc *leanConn) {
	<-lc.free
	r.global <- struct{}{}
}

// TestLeanFinishCounts: answered queries count with their latency from
// the due time and service time from the write; failures by status, or
// by rcode for answers that refuse; every answer by its rcode.
func TestLeanFinishCounts(t *testing.T) {
	r := testRun(t, Config{Keep: true}, newMemPipe(10))
	r.finish([]doneQ{
		{flight{due: 1e6, sent: 2e6}, 5e6, transport.StatusOK, dns.RcodeSuccess},
		{flight{due: 1e6, sent: 1e6}, 3e6, transport.StatusOK, dns.RcodeSuccess},
		{flight{due: 1e6, sent: 1e6}, 9e6, transport.StatusTimeout, noRcode},
		{flight{due: 1e6, sent: 1e6}, 2e6, transport.StatusRcode, dns.RcodeRefused},
	})
	require.Equal(t, 2, r.res.OK)
	require.Equal(t, map[string]int{"timeout": 1, "REFUSED": 1}, r.res.Errors)
	require.Equal(t, map[string]int{"NOERROR": 2, "REFUSED": 1}, r.res.Rcodes)
	require.Equal(t, "REFUSED", r.res.Samples[3].Rcode)
	require.Equal(t, int64(2), r.res.Latency.TotalCount())
	require.True(t, r.res.Latency.ValuesAreEquivalent(4000, r.res.Latency.Max()), "µs from the due time")
	require.True(t, r.res.Service.ValuesAreEquivalent(3000, r.res.Service.Max()), "µs from the write")
	require.Len(t, r.res.Samples, 4)
	require.Equal(t, int64(5e6), r.lastAnswer)
	require.Positive(t, r.service.Load(), "the service time's moving average moved")
}

// TestLeanMatch: an answer takes its query out of its slot; one for a
// free slot matches nothing; one past the timeout is timed out.
func TestLeanMatch(t *testing.T) {
	r := testRun(t, Config{Options: transport.Options{Timeout: time.Millisecond}}, newMemPipe(10))
	lc := r.conns[0]
	lc.slots[7] = flight{due: 10, sent: 20}
	lc.slots[8] = flight{due: 10, sent: 20}
	d, ok := r.match(lc, 7, transport.StatusOK, 0, 500)
	require.True(t, ok)
	require.Equal(t, transport.StatusOK, d.status)
	require.Zero(t, lc.slots[7].sent, "the slot is free again")
	_, ok = r.match(lc, 7, transport.StatusOK, 0, 600)
	require.False(t, ok, "a duplicate answer matches nothing")
	d, ok = r.match(lc, 8, transport.StatusOK, 0, 2e6)
	require.True(t, ok)
	require.Equal(t, transport.StatusTimeout, d.status, "later than the timeout")
}

// TestLeanTimeOut: the sweep ends only the queries past the timeout, and
// gives their room back.
func TestLeanTimeOut(t *testing.T) {
	r := testRun(t, Config{Options: transport.Options{Timeout: time.Millisecond}}, newMemPipe(10))
	lc := r.conns[0]
	for _, s := range []uint16{1, 2} {
		take(r, lc)
		r.inFlight.Add(1)
		lc.slots[s] = flight{due: 1, sent: map[uint16]int64{1: 1, 2: 5e6}[s]}
	}
	r.timeOut(5e6 + 1)
	require.Equal(t, 1, r.res.Errors[string(transport.StatusTimeout)])
	require.NotZero(t, lc.slots[2].sent, "the recent query stays")
	require.Len(t, lc.free, 9, "the timed-out query's room is back")
	require.Len(t, r.global, 1)
	require.Equal(t, int64(1), r.inFlight.Load())
}

// TestLeanFailInFlightKeepsTheBatch: a lost connection's queries in
// flight end as closed, but the batch not yet written stays for the
// connection that replaces it.
func TestLeanFailInFlightKeepsTheBatch(t *testing.T) {
	r := testRun(t, Config{}, newMemPipe(10))
	lc := r.conns[0]
	for s := range uint16(3) {
		take(r, lc)
		r.inFlight.Add(1)
		lc.slots[s] = flight{due: 1, sent: 1}
	}
	r.failInFlight(lc, []uint32{2})
	require.Equal(t, 2, r.res.Errors[string(transport.StatusClosed)])
	require.NotZero(t, lc.slots[2].sent)
	require.Zero(t, lc.slots[0].sent)
	require.Len(t, lc.free, 9)
}

// TestSenderAddWrapsItsSlots: a query still unanswered when its slot
// comes round again (65,536 queries later) is counted lost, as dnsperf
// counts it, and its room is given back.
func TestSenderAddWrapsItsSlots(t *testing.T) {
	r := testRun(t, Config{}, newMemPipe(10))
	s := r.newSender(context.Background(), 0, r.conns[0])
	take(r, s.lc)
	s.add(0, 0)
	s.seq = 1 << 16 // the same slot again
	take(r, s.lc)
	s.add(1, time.Millisecond)
	require.Equal(t, 1, r.res.Errors[string(transport.StatusTimeout)])
	require.Equal(t, int64(2), r.sent.Load())
	require.Equal(t, []uint32{0, 1 << 16}, s.seqs, "both in the batch")
	require.Len(t, s.lc.free, 9, "one query's room is back")
}

// TestSenderFlushReplacesALostConnection: a write that fails notes why
// the connection ended, dials a new one and writes the batch there.
func TestSenderFlushReplacesALostConnection(t *testing.T) {
	broken := newMemPipe(10)
	broken.failWrites = 1
	r := testRun(t, Config{}, broken)
	fresh := newMemPipe(10)
	r.dialPipe = func(context.Context, *transport.Endpoint, transport.Options, func() bool) (pipe, error) {
		return fresh, nil
	}
	r.startReader(r.conns[0])
	s := r.newSender(context.Background(), 0, r.conns[0])
	take(r, s.lc)
	s.add(0, 0)
	require.True(t, s.flush())
	require.Equal(t, []uint32{0}, fresh.seqs(), "the batch went on the new connection")
	require.Empty(t, broken.seqs())
	require.Equal(t, 1, r.res.Reconnects)
	require.Len(t, r.losses, 1)
	require.Empty(t, s.seqs)
}

// TestSenderGivesUpWhenNoConnection: when the replacement cannot be
// dialled, the batch ends as closed and the sender stops.
func TestSenderGivesUpWhenNoConnection(t *testing.T) {
	broken := newMemPipe(10)
	broken.failWrites = 1
	r := testRun(t, Config{}, broken)
	r.dialPipe = func(context.Context, *transport.Endpoint, transport.Options, func() bool) (pipe, error) {
		return nil, errors.New("connection refused")
	}
	r.startReader(r.conns[0])
	s := r.newSender(context.Background(), 0, r.conns[0])
	take(r, s.lc)
	s.add(0, 0)
	require.False(t, s.flush())
	require.Equal(t, 1, r.res.Errors[string(transport.StatusClosed)])
	require.Len(t, r.losses, 2, "the loss and the failed reconnect")
}

// TestLeanRunSplitsTheSchedule: with two connections each sender writes
// every other query of the schedule, and every query is answered.
func TestLeanRunSplitsTheSchedule(t *testing.T) {
	a, b := newMemPipe(100), newMemPipe(100)
	r := testRun(t, Config{Rate: 2000, Duration: time.Second, MaxQueries: 10}, a, b)
	for _, lc := range r.conns {
		r.startReader(lc)
	}
	var wg sync.WaitGroup
	for k, lc := range r.conns {
		wg.Go(r.newSender(context.Background(), k, lc).run)
	}
	wg.Wait()
	r.drain()
	r.stopReaders()
	require.Equal(t, []uint32{0, 1, 2, 3, 4}, a.seqs(), "queries 0, 2, 4, 6, 8, as its own sequence")
	require.Equal(t, []uint32{0, 1, 2, 3, 4}, b.seqs())
	require.Equal(t, 10, r.res.OK)
	require.Equal(t, int64(10), r.sent.Load())
}

// TestDueBeforeCountsTheSchedule: the queries dueBefore counts, from a
// sender's first unsent to the end of its share, are those dueAt puts
// before the time the run stopped (and within its duration and
// MaxQueries), whatever the rate, duration and number of senders, also
// where a due time falls on the end (rate × seconds a whole number,
// reckoned in floats: one more or one fewer); and the shares of all
// senders add up to the whole schedule's.
func TestDueBeforeCountsTheSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for i := range 20000 {
		rate := math.Exp(rng.Float64()*20 - 5) // 0.007/s to 3.3 million/s
		c := Config{Rate: rate, Duration: time.Duration(rng.Int64N(int64(24 * time.Hour))), MaxQueries: []int{1, 50, 5000, 1 << 30}[rng.IntN(4)]}
		elapsed := time.Duration(rng.Int64N(int64(24 * time.Hour)))
		if i%2 == 0 { // the end on a due time
			k := 1 + rng.Int64N(int64(c.Duration.Seconds()*rate)+1)
			c.Duration = time.Duration(float64(k) * float64(time.Second) / rate)
			elapsed = c.Duration + time.Duration(rng.Int64N(3)-1)
		}
		// The first query not due before the stop, by dueAt itself.
		first := sort.Search(1<<40, func(i int) bool {
			at, ok := dueAt(i, c.Rate, c.Duration)
			return !ok || at >= elapsed
		})
		first = min(first, c.MaxQueries)
		n, from := 1+rng.IntN(8), rng.IntN(3000)
		want := 0
		if from < first {
			want = (first - from + n - 1) / n
		}
		require.Equal(t, want, dueBefore(from, n, c, elapsed), "%v/s for %v, %d senders from %d, stopped at %v", c.Rate, c.Duration, n, from, elapsed)
		all := 0
		for k := range n {
			all += dueBefore(k, n, c, elapsed)
		}
		require.Equal(t, first, all, "%v/s for %v: the senders' shares make the schedule", c.Rate, c.Duration)
	}
}

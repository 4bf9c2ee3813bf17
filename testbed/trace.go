package testbed

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/listfile"
)

// A Trace is a link's delivery opportunities in Mahimahi's format: one
// line per opportunity, the milliseconds since the trace began, never
// decreasing; an opportunity delivers OpportunityBytes of queued packets
// (a packet may span several, and what one packet leaves of an
// opportunity goes to the next packet if it is already queued). An
// opportunity with nothing queued is lost. At its end the trace starts
// again, shifted by its last line's time, as Mahimahi's mm-link does.
type Trace struct {
	Name string
	// At are the milliseconds that have opportunities, in order, and N
	// how many each has: a trace costs what its file holds, not what its
	// times span (a line of a day's milliseconds would take 345 MB of
	// per-millisecond counts). The last instant is the trace's period.
	At    []uint32
	N     []uint32
	Total int    // opportunities in one period
	Hash  string // SHA-256 of the file, for the run record
}

// OpportunityBytes is what one opportunity delivers: a 1500-octet IP
// packet, Mahimahi's unit (its 1504 counts the TUN header too).
const OpportunityBytes = 1500

// Period is how long the trace runs before it repeats.
func (t *Trace) Period() time.Duration {
	return time.Duration(t.period()) * time.Millisecond
}

func (t *Trace) period() int64 { return int64(t.At[len(t.At)-1]) }

// Rate is the trace's mean rate in bit/s.
func (t *Trace) Rate() float64 {
	return float64(t.Total) * OpportunityBytes * 8 / t.Period().Seconds()
}

// Bytes is what the trace can deliver in [from, to), both from its start,
// across repetitions.
func (t *Trace) Bytes(from, to time.Duration) int64 {
	ms := func(d time.Duration) int64 { return int64(math.Ceil(float64(d) / float64(time.Millisecond))) } // first whole ms at or after d
	var n int64
	for m, end := ms(from), ms(to); ; m++ {
		var c int
		if m, c = t.next(m); m >= end {
			return n * OpportunityBytes
		}
		n += int64(c)
	}
}

var (
	tracesMu sync.Mutex
	traces   = map[string]*Trace{}
)

// cachedTrace loads a trace once per name: profiles name them, and a
// profile is validated, applied and reapplied.
func cachedTrace(name string) (*Trace, error) {
	tracesMu.Lock()
	defer tracesMu.Unlock()
	if t, ok := traces[name]; ok {
		return t, nil
	}
	t, err := LoadTrace(name)
	if err != nil {
		return nil, err
	}
	traces[name] = t
	return t, nil
}

// count is the number of opportunities at instant ms (since the trace's
// start, across repetitions): the end of one period and the start of the
// next fall on the same instant.
func (t *Trace) count(ms int64) int {
	period := t.period()
	k := ms % period
	c := t.at(k)
	if k == 0 && ms >= period {
		c += t.at(period)
	}
	return c
}

// at is the number of opportunities at millisecond k of the file.
func (t *Trace) at(k int64) int {
	i := sort.Search(len(t.At), func(i int) bool { return int64(t.At[i]) >= k })
	if i < len(t.At) && int64(t.At[i]) == k {
		return int(t.N[i])
	}
	return 0
}

// next is the first instant at or after ms that has opportunities, and
// how many: a long gap in a trace is crossed in one step.
func (t *Trace) next(ms int64) (int64, int) {
	period := t.period()
	for {
		if c := t.count(ms); c > 0 {
			return ms, c
		}
		k := ms % period
		i := sort.Search(len(t.At), func(i int) bool { return int64(t.At[i]) > k })
		if int64(t.At[i]) < period { // the last instant is the period
			ms += int64(t.At[i]) - k
		} else {
			ms += period - k // the next repetition's start, which has some
		}
	}
}

// traceCursor serves packets from a trace's opportunities in order, as
// Mahimahi's LinkQueue does: opportunities that pass with nothing queued
// are lost; the bytes a packet leaves of one go to the next packet if it
// was queued by then.
type traceCursor struct {
	tr      *Trace
	base    time.Time // the trace's start
	inst    int64     // the current instant, ms since base
	left    int       // whole opportunities left at inst
	partial int       // octets left of a started opportunity at inst
}

func newTraceCursor(tr *Trace, base time.Time) *traceCursor {
	return &traceCursor{tr: tr, base: base, inst: -1}
}

// serve returns when a packet of size octets, first in line at start,
// has been delivered: the instant of the opportunity giving its last
// octet.
func (c *traceCursor) serve(start time.Time, size int) time.Time {
	if first := int64(math.Ceil(float64(start.Sub(c.base)) / float64(time.Millisecond))); first > c.inst {
		// What the cursor had left passed before the packet came: lost.
		c.inst, c.left, c.partial = first, c.tr.count(first), 0
	}
	for size > 0 {
		if c.partial == 0 {
			if c.left == 0 { // an instant without opportunities, or used up
				c.inst, c.left = c.tr.next(c.inst + 1)
			}
			c.left--
			c.partial = OpportunityBytes
		}
		use := min(size, c.partial)
		size -= use
		c.partial -= use
	}
	return c.base.Add(time.Duration(c.inst) * time.Millisecond)
}

// ParseTrace reads a trace in Mahimahi's format; name is for errors.
func ParseTrace(name string, r io.Reader) (*Trace, error) {
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(r, h))
	var at, n []uint32
	last, lines := int64(-1), 0
	for sc.Scan() {
		lines++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			return nil, fmt.Errorf("%s:%d: an empty line (Mahimahi refuses them too)", name, lines)
		}
		ms, err := strconv.ParseInt(line, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a millisecond count", name, lines, line)
		}
		if ms < last {
			return nil, fmt.Errorf("%s:%d: %d ms comes after %d ms: times must not decrease", name, lines, ms, last)
		}
		if ms > 24*3600*1000 {
			return nil, fmt.Errorf("%s:%d: %d ms is more than a day", name, lines, ms)
		}
		if ms > last {
			at, n = append(at, uint32(ms)), append(n, 0)
		}
		n[len(n)-1]++
		last = ms
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case lines == 0:
		return nil, fmt.Errorf("%s: no delivery opportunities", name)
	case last == 0:
		return nil, fmt.Errorf("%s: the trace must last longer than 0 ms", name)
	}
	return &Trace{Name: name, At: at, N: n, Total: lines, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// LoadTrace reads a trace file, or makes a built-in one (BuiltinTraces).
func LoadTrace(name string) (*Trace, error) {
	if m, ok := BuiltinTraces[name]; ok {
		var b strings.Builder
		if err := m.Write(&b); err != nil {
			return nil, err
		}
		return ParseTrace(name, strings.NewReader(b.String()))
	}
	f, err := os.Open(name)
	if err != nil {
		names := make([]string, 0, len(BuiltinTraces))
		for n := range BuiltinTraces {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("trace %q: not a built-in one (%s) and not readable: %w", name, strings.Join(names, ", "), err)
	}
	defer f.Close()
	return ParseTrace(name, f)
}

// WriteTrace writes opportunities in Mahimahi's format for a rate that
// changes over time: rate(t) in bit/s for each millisecond of d. The
// fractional opportunities carry over, so the bytes delivered follow the
// rates over any window of a few milliseconds. Mahimahi repeats a trace
// after its last line, so the last opportunity is moved to d's end (by at
// most the gap before it) to keep the period d.
func WriteTrace(w io.Writer, d time.Duration, rate func(t time.Duration) float64) error {
	ms := int(d / time.Millisecond)
	bw := bufio.NewWriter(w)
	pending := -1 // the latest opportunity, written once another follows
	carry := 0.0
	for m := range ms {
		carry += rate(time.Duration(m)*time.Millisecond) / 8 / 1000 / OpportunityBytes
		for ; carry >= 1; carry-- {
			if pending >= 0 {
				bw.WriteString(strconv.Itoa(pending) + "\n")
			}
			pending = m + 1 // at the end of the millisecond its octets came in
		}
	}
	if pending < 0 {
		return fmt.Errorf("the rates give no opportunity in %s", d)
	}
	bw.WriteString(strconv.Itoa(ms) + "\n")
	return bw.Flush()
}

// maxOpportunities bounds the delivery opportunities (a line each) a
// converted trace holds: half an hour of a 4G log makes about three
// million; past this the rates were surely not in bit/s.
const maxOpportunities = 1 << 26

// ConvertThroughput turns a throughput log (one "SECONDS BITS_PER_SECOND"
// line per sample, as iperf3 intervals, the Ghent 4G or Norway HSDPA logs
// reduce to; '#' starts a comment) into a trace: each rate holds until
// the next sample's time. A log longer than a day, or whose rates make
// more than maxOpportunities, is refused before anything is written.
func ConvertThroughput(name string, r io.Reader, w io.Writer) error {
	type sample struct{ at, rate float64 }
	var ss []sample
	err := listfile.EachIn(r, name, func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) != 2 {
			return errors.New("want SECONDS BITS_PER_SECOND")
		}
		at, err1 := strconv.ParseFloat(f[0], 64)
		rate, err2 := strconv.ParseFloat(f[1], 64)
		finite := !math.IsInf(at, 0) && !math.IsNaN(at) && !math.IsInf(rate, 0) && !math.IsNaN(rate)
		switch {
		case err1 != nil || err2 != nil || !finite || at < 0 || rate < 0:
			return fmt.Errorf("%q is not two non-negative numbers", line)
		case len(ss) > 0 && at <= ss[len(ss)-1].at:
			return fmt.Errorf("time %g s does not come after %g s", at, ss[len(ss)-1].at)
		}
		ss = append(ss, sample{at, rate})
		return nil
	})
	if err != nil {
		return err
	}
	if len(ss) < 2 {
		return fmt.Errorf("%s: two samples at least, to know how long the last rate lasts", name)
	}
	if span := ss[len(ss)-1].at - ss[0].at; span > 24*3600 {
		return fmt.Errorf("%s: the log lasts longer than a day (%g s), which a trace may not", name, span)
	}
	opportunities := 0.0
	for i := range ss[:len(ss)-1] {
		opportunities += ss[i].rate * (ss[i+1].at - ss[i].at) / 8 / OpportunityBytes
	}
	if opportunities > maxOpportunities {
		return fmt.Errorf("%s: its rates make %.3g delivery opportunities, more than a trace may hold (%d): are they in bit/s?", name, opportunities, maxOpportunities)
	}
	start := ss[0].at
	end := time.Duration((ss[len(ss)-1].at - start) * float64(time.Second))
	i := 0
	return WriteTrace(w, end, func(t time.Duration) float64 {
		for i+1 < len(ss) && ss[i+1].at-start <= t.Seconds() {
			i++
		}
		return ss[i].rate
	})
}

// TraceModel makes a synthetic trace: the rate is a random walk in log
// space around Mean, moving every Step by a normal step of Sigma (in
// natural-log units) pulled back towards the mean (an Ornstein-Uhlenbeck
// process, as used to model cellular throughput), with an outage of
// OutageLen whenever a Poisson clock of OutageRate per second fires.
// Same seed, same trace.
type TraceModel struct {
	Mean       float64       // bit/s
	Sigma      float64       // per step, natural-log units
	Revert     float64       // share of the distance to the mean closed per step
	Step       time.Duration // how long a rate holds
	OutageRate float64       // per second
	OutageLen  time.Duration
	Duration   time.Duration
	Seed       uint64
}

// BuiltinTraces are the synthetic traces doxlab ships (see TraceModel):
// users bring their own measured ones (Mahimahi's, or converted from
// throughput logs).
var BuiltinTraces = map[string]TraceModel{
	// An LTE link seen from a moving car: ~20 Mbit/s, the rate changing
	// every 10 ms (log-rate s.d. 0.4 in steady state), one 200 ms outage
	// every 10 s on average.
	"lte-driving": {Mean: 20e6, Sigma: 0.08, Revert: 0.02, Step: 10 * time.Millisecond, OutageRate: 0.1, OutageLen: 200 * time.Millisecond, Duration: 60 * time.Second, Seed: 1},
	// A UMTS/HSPA link, walking: ~2 Mbit/s, slower changes (s.d. 0.25),
	// a 500 ms outage every 50 s.
	"umts-walking": {Mean: 2e6, Sigma: 0.05, Revert: 0.02, Step: 20 * time.Millisecond, OutageRate: 0.02, OutageLen: 500 * time.Millisecond, Duration: 60 * time.Second, Seed: 2},
	// A 5G mid-band link: ~200 Mbit/s, fast changes (s.d. 0.32), no outages.
	"5g-midband": {Mean: 200e6, Sigma: 0.1, Revert: 0.05, Step: 5 * time.Millisecond, Duration: 30 * time.Second, Seed: 3},
	// A constant 720 Mbit/s, the rate at which Mahimahi delivers ~300.
	"const-720m": {Mean: 720e6, Step: time.Second, Duration: 10 * time.Second, Seed: 4},
}

// Write writes the model's trace in Mahimahi's format.
func (m TraceModel) Write(w io.Writer) error {
	if m.Mean <= 0 || m.Step <= 0 || m.Duration < m.Step {
		return fmt.Errorf("a trace model needs a positive mean, a step and a duration of one step at least")
	}
	rng := rand.New(rand.NewPCG(m.Seed, m.Seed^0x5eed))
	logMean := math.Log(m.Mean)
	x := logMean
	var rate float64
	var stepEnd, outageEnd time.Duration
	return WriteTrace(w, m.Duration, func(t time.Duration) float64 {
		if t >= stepEnd {
			x += m.Revert*(logMean-x) + m.Sigma*rng.NormFloat64()
			// The walk's mean in linear terms drifts above Mean by
			// exp(var/2); correct for it so that Mean is the mean rate.
			rate = math.Exp(x - m.stationaryVar()/2)
			stepEnd += m.Step
			if m.OutageRate > 0 && rng.Float64() < m.OutageRate*m.Step.Seconds() {
				outageEnd = t + m.OutageLen
			}
		}
		if t < outageEnd {
			return 0
		}
		return rate
	})
}

// stationaryVar is the log-rate's variance in the walk's steady state.
func (m TraceModel) stationaryVar() float64 {
	if m.Sigma == 0 || m.Revert <= 0 {
		return 0
	}
	return m.Sigma * m.Sigma / (1 - (1-m.Revert)*(1-m.Revert))
}

package testbed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mahimahi is Mahimahi's LinkQueue::rationalize, written out plainly: at
// each opportunity, in order, the queued packets take its octets; a
// packet leaves at the opportunity that gives its last octet.
func mahimahi(tr *Trace, arrivals []time.Duration, sizes []int, cycles int) []time.Duration {
	out := make([]time.Duration, len(arrivals))
	next, left := 0, 0 // next packet not yet left; its octets still to send
	period := int(tr.period())
	for k := 0; k < cycles && next < len(arrivals); k++ {
		for m := 0; m <= period; m++ {
			if k > 0 && m == 0 {
				continue // instant k·period was the previous cycle's last
			}
			at := time.Duration(k*period+m) * time.Millisecond
			for range tr.count(int64(k*period + m)) {
				budget := OpportunityBytes
				for budget > 0 && next < len(arrivals) && arrivals[next] <= at {
					if left == 0 {
						left = sizes[next]
					}
					use := min(left, budget)
					left -= use
					budget -= use
					if left == 0 {
						out[next] = at
						next++
					} else {
						budget = 0 // Mahimahi: a packet in transit takes the whole opportunity
					}
				}
			}
		}
	}
	return out
}

// TestTraceCursorIsMahimahi: the cursor, computing each departure as its
// packet arrives, gives Mahimahi's departures exactly, across
// repetitions of the trace, with idle gaps, partly used opportunities
// and packets spanning several.
func TestTraceCursorIsMahimahi(t *testing.T) {
	tr, err := ParseTrace("t", strings.NewReader("0\n1\n1\n1\n4\n7\n7\n9\n12\n"))
	require.NoError(t, err)
	require.Equal(t, 12*time.Millisecond, tr.Period())
	require.Equal(t, 9, tr.Total)
	rng := rand.New(rand.NewPCG(1, 2))
	var arrivals []time.Duration
	var sizes []int
	at := time.Duration(0)
	for range 400 {
		at += time.Duration(rng.Float64() * float64(3*time.Millisecond))
		if rng.IntN(20) == 0 {
			at += 30 * time.Millisecond // idle: opportunities pass unused
		}
		arrivals = append(arrivals, at)
		sizes = append(sizes, []int{60, 576, 1500, 2900, 1200}[rng.IntN(5)])
	}
	want := mahimahi(tr, arrivals, sizes, 1000)
	base := time.Unix(1000, 0)
	c := newTraceCursor(tr, base)
	var end time.Time
	for i, a := range arrivals {
		start := base.Add(a)
		if end.After(start) {
			start = end
		}
		end = c.serve(start, sizes[i])
		require.Equal(t, want[i], end.Sub(base), "packet %d of %d octets, arrived at %s", i, sizes[i], a)
	}
}

func TestTraceBytesAndRate(t *testing.T) {
	tr, err := ParseTrace("t", strings.NewReader("0\n5\n5\n10\n"))
	require.NoError(t, err)
	require.InDelta(t, 4*1500*8/0.010, tr.Rate(), 1e-6)
	require.EqualValues(t, 3*1500, tr.Bytes(0, 10*time.Millisecond), "0, 5, 5; 10 is at the window's end")
	require.EqualValues(t, 2*1500, tr.Bytes(10*time.Millisecond, 11*time.Millisecond), "instant 10 ends one period and starts the next")
	require.EqualValues(t, (1+2*79)*1500, tr.Bytes(0, 400*time.Millisecond), "instant 0, then two every 5 ms up to 395")

	for _, c := range []struct{ in, msg string }{
		{"", "no delivery opportunities"},
		{"0\n0\n", "longer than 0 ms"},
		{"1\n\n2\n", "t:2: an empty line"},
		{"5\n3\n", "t:2: 3 ms comes after 5 ms"},
		{"1\nx\n", `t:2: "x" is not a millisecond count`},
	} {
		_, err := ParseTrace("t", strings.NewReader(c.in))
		require.ErrorContains(t, err, c.msg)
	}
}

// TestSparseTrace: a trace costs what its file holds, whatever its times
// span: a few lines over a day are a few instants, a packet waiting for
// the next opportunity a day away is served at it in one step, and
// counting a window's bytes walks opportunities, not milliseconds. Both
// agree with a count of every millisecond on random traces.
func TestSparseTrace(t *testing.T) {
	const day = 24 * 3600 * 1000
	tr, err := ParseTrace("t", strings.NewReader("5\n86400000\n"))
	require.NoError(t, err)
	require.Len(t, tr.At, 2, "two instants, not a day of milliseconds")
	require.Equal(t, 24*time.Hour, tr.Period())
	base := time.Unix(1000, 0)
	c := newTraceCursor(tr, base)
	require.Equal(t, 5*time.Millisecond, c.serve(base, 100).Sub(base))
	require.Equal(t, day*time.Millisecond, c.serve(base.Add(6*time.Millisecond), 100).Sub(base), "the period's end")
	require.Equal(t, (day+5)*time.Millisecond, c.serve(base.Add(day*time.Millisecond), 1500).Sub(base), "the next day's first")
	require.EqualValues(t, 4*1500, tr.Bytes(0, 2*24*time.Hour+time.Millisecond))
	_, err = ParseTrace("t", strings.NewReader("86400001\n"))
	require.ErrorContains(t, err, "more than a day")

	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var b strings.Builder
		ms := 0
		for range 1 + rng.IntN(12) {
			ms += rng.IntN(4) * rng.IntN(4)
			b.WriteString(strconv.Itoa(ms) + "\n")
		}
		fmt.Fprintln(&b, ms+1+rng.IntN(3))
		tr, err := ParseTrace("t", strings.NewReader(b.String()))
		require.NoError(t, err)
		for range 20 {
			from, to := int64(rng.IntN(60)), int64(rng.IntN(60))
			var want int64
			for m := from; m < to; m++ {
				want += int64(tr.count(m))
			}
			require.Equal(t, want*OpportunityBytes, tr.Bytes(time.Duration(from)*time.Millisecond, time.Duration(to)*time.Millisecond), "%q [%d, %d)", b.String(), from, to)
			m, n := tr.next(from)
			for k := from; k < m; k++ {
				require.Zero(t, tr.count(k), "%q: %d has none before %d", b.String(), k, m)
			}
			require.Equal(t, tr.count(m), n)
			require.Positive(t, n)
		}
	}
}

// TestBuiltinTracesAndConverter: the built-in models give their mean
// rate, the converter follows a throughput log, and profiles name traces.
func TestBuiltinTracesAndConverter(t *testing.T) {
	for name, m := range BuiltinTraces {
		tr, err := LoadTrace(name)
		require.NoError(t, err, name)
		require.InDelta(t, m.Mean, tr.Rate(), 0.25*m.Mean, "%s: the mean rate, outages and the walk's luck aside", name)
	}
	var b strings.Builder
	require.NoError(t, ConvertThroughput("log", strings.NewReader("# t rate\n0 12e6\n0.5 1.2e6\n1.0 0\n"), &b))
	tr, err := ParseTrace("conv", strings.NewReader(b.String()))
	require.NoError(t, err)
	require.InDelta(t, 12e6/8*0.5, tr.Bytes(0, 500*time.Millisecond), 1500)
	require.InDelta(t, 1.2e6/8*0.5, tr.Bytes(500*time.Millisecond, time.Second), 1500)
	require.Equal(t, time.Second, tr.Period(), "the log's span")
	require.ErrorContains(t, ConvertThroughput("log", strings.NewReader("0 1e6\n0 2e6\n"), &b), "log:2: time 0 s does not come after 0 s")
	require.ErrorContains(t, ConvertThroughput("log", strings.NewReader("0 1e6\n"), &b), "two samples at least")

	p := Profile{Name: "lte", Down: Direction{Trace: "lte-driving", Delay: 20 * time.Millisecond}}
	require.NoError(t, p.Validate())
	require.InDelta(t, 20e6, p.Down.MeanRate(), 5e6)
	p.Down.Rate = 1e6
	require.ErrorContains(t, p.Validate(), "rate and trace exclude each other")
	p = Profile{Name: "x", Up: Direction{Trace: "no-such-trace"}}
	require.ErrorContains(t, p.Validate(), `trace "no-such-trace": not a built-in one`)
	require.False(t, math.IsNaN(Direction{Trace: "lte-driving"}.MeanRate()))
}

// TestConvertThroughputRefuses: a throughput log that is wrong gets a
// clear error at once, naming its line, and writes nothing: a time or a
// rate that is no finite number, a log longer than a day (a trace may
// last no longer), and rates that would make more delivery
// opportunities than a trace may hold (a rate in bytes, or in bit/ms,
// read as bit/s). Each of these hung, or filled memory, before.
func TestConvertThroughputRefuses(t *testing.T) {
	for name, c := range map[string]struct{ log, err string }{
		"an infinite time":     {"0 1e6\n+Inf 1e6\n", `log:2: "+Inf 1e6" is not two non-negative numbers`},
		"a rate not a number":  {"0 NaN\n1 1e6\n", `log:1: "0 NaN" is not two non-negative numbers`},
		"a time past a day":    {"0 1e6\n1e300 1e6\n", "log: the log lasts longer than a day"},
		"a day and a second":   {"0 1e3\n86401 1e3\n", "log: the log lasts longer than a day"},
		"a rate past any link": {"0 1e15\n10 0\n", "log: its rates make 8.33e+11 delivery opportunities, more than a trace may hold"},
		"a line of three":      {"0 1e6 x\n", "log:1: want SECONDS BITS_PER_SECOND"},
	} {
		var b strings.Builder
		done := make(chan error, 1)
		go func() { done <- ConvertThroughput("log", strings.NewReader(c.log), &b) }()
		select {
		case err := <-done:
			require.ErrorContains(t, err, c.err, name)
			require.Zero(t, b.Len(), "%s: nothing written", name)
		case <-time.After(time.Minute):
			t.Fatalf("%s: still converting after a minute", name)
		}
	}
	// A day at a 4G rate is a trace.
	var b strings.Builder
	require.NoError(t, ConvertThroughput("log", strings.NewReader("0 20e3\n86400 0\n"), &b))
}

// FuzzParseTrace: whatever a trace file holds, it is refused or read
// into instants that rise, each with opportunities, that count the
// file's lines; and a packet on it leaves at an instant of the trace,
// found in a bounded number of steps, not after a walk through the
// milliseconds.
func FuzzParseTrace(f *testing.F) {
	for _, s := range []string{"0\n1\n1\n1\n4\n7\n7\n9\n12\n", "5\n86400000\n", "0\n", "3\n3\n", "1\n\n2\n", "-1\n", "86400001\n", "0007\n 8\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ParseTrace("t", strings.NewReader(in))
		if err != nil {
			return
		}
		total := 0
		for i := range tr.At {
			require.Positive(t, tr.N[i])
			if i > 0 {
				require.Greater(t, tr.At[i], tr.At[i-1])
			}
			total += int(tr.N[i])
		}
		require.Equal(t, tr.Total, total)
		require.Positive(t, tr.Period())
		base := time.Unix(0, 0)
		c := newTraceCursor(tr, base)
		at := base
		for range 5 {
			at = c.serve(at, 3000)
			ms := int64(at.Sub(base) / time.Millisecond)
			require.Positive(t, tr.count(ms), "%d ms has no opportunity", ms)
		}
		require.GreaterOrEqual(t, tr.Bytes(0, 3*tr.Period()), int64(OpportunityBytes))
	})
}

// FuzzConvertThroughput: whatever a throughput log holds, it is refused
// or converted into a trace that reads back, within the bounds a trace
// may have.
func FuzzConvertThroughput(f *testing.F) {
	for _, s := range []string{"0 1e6\n1 2e6\n", "# c\n0 0\n0.5 8e6\n2 1e6\n", "0 1e15\n100 1\n", "0 nan\n1 1\n", "1 1\n0 1\n", "0 1e6\n90000 1e6\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var out strings.Builder
		if err := ConvertThroughput("log", strings.NewReader(in), &out); err != nil {
			return
		}
		tr, err := ParseTrace("converted", strings.NewReader(out.String()))
		require.NoError(t, err, "what the converter writes reads back")
		require.LessOrEqual(t, tr.Total, maxOpportunities+1)
		require.LessOrEqual(t, tr.Period(), 24*time.Hour)
	})
}

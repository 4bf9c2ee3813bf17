package testbed

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// udpPacket is a minimal IPv4/UDP packet of size octets between two ports.
func udpPacket(size int, sport, dport byte) []byte {
	p := make([]byte, size)
	p[0], p[9] = 0x45, 17
	copy(p[12:20], []byte{10, 200, 0, 1, 10, 200, 0, 2})
	p[21], p[23] = sport, dport
	return p
}

// reno is a TCP Reno sender in the simulation: it keeps cwnd packets in
// flight, grows cwnd by one per round trip, halves it (once per round
// trip) when a drop is seen a round trip after it happened; it starts
// slow (one more per ACK) until the first drop.
type reno struct {
	cwnd     float64
	slow     bool // slow start: until the first loss
	inflight int
	events   []renoEvent // ACKs and losses on their way back, by time
	lastCut  time.Time
	rtt      time.Duration
}

type renoEvent struct {
	at   time.Time
	lost bool
}

func (r *reno) back(at time.Time, lost bool) {
	i := len(r.events)
	for i > 0 && r.events[i-1].at.After(at) {
		i--
	}
	r.events = slices.Insert(r.events, i, renoEvent{at, lost})
}

// step handles what came back by now and sends what the window allows.
func (r *reno) step(now time.Time, send func()) {
	for len(r.events) > 0 && !r.events[0].at.After(now) {
		e := r.events[0]
		r.events = r.events[1:]
		r.inflight--
		switch {
		case !e.lost && r.slow:
			r.cwnd++
		case !e.lost:
			r.cwnd += 1 / r.cwnd
		case e.at.Sub(r.lastCut) > r.rtt:
			r.cwnd, r.lastCut, r.slow = max(r.cwnd/2, 2), e.at, false
		}
	}
	for float64(r.inflight) < r.cwnd {
		r.inflight++
		send()
	}
}

// bulkTCP runs one Reno flow through a link of rate bit/s with queue q,
// 20 ms of round trip besides, for d; it returns the packets' median
// sojourn in the queue after the first 5 s, and the link's use.
func bulkTCP(q *aqmQueue, rate float64, d time.Duration) (time.Duration, float64) {
	base := time.Unix(0, 0)
	const rtt = 20 * time.Millisecond
	var sojourns []time.Duration
	sent := 0
	l := &aqmLink{q: q, serve: func(start time.Time, size int) time.Time {
		return start.Add(time.Duration(float64(size*8) / rate * float64(time.Second)))
	}}
	r := &reno{cwnd: 2, rtt: rtt, slow: true}
	leave := func(p aqmPacket, out time.Time) {
		if p.arrival.Sub(base) > 5*time.Second {
			sojourns = append(sojourns, out.Sub(p.arrival)-time.Duration(float64(p.size*8)/rate*float64(time.Second)))
			sent++
		}
		r.back(out.Add(rtt), false)
	}
	drop := func(p aqmPacket) { r.back(p.arrival.Add(rtt), true) }
	for at := time.Duration(0); at < d; at += 50 * time.Microsecond {
		now := base.Add(at)
		l.run(now, leave, drop)
		r.step(now, func() { l.admit(aqmPacket{arrival: now, size: 1500, data: udpPacket(1500, 1, 80)}) })
	}
	slices.Sort(sojourns)
	return sojourns[len(sojourns)/2], float64(sent*1500*8) / (d - 5*time.Second).Seconds() / rate
}

// TestCoDelHoldsItsTarget: one bulk TCP (Reno) flow through a 10 Mbit/s
// link. Tail drop with a 1000-packet queue lets the queue stand at
// hundreds of milliseconds; CoDel keeps the median sojourn near its 5 ms
// target and the link busy. (CoDel is for responsive flows: an
// unresponsive one above the rate builds a queue while its drop rate
// ramps up, RFC 8289 §1.)
func TestCoDelHoldsItsTarget(t *testing.T) {
	testutil.Timed(t)
	for _, rate := range []float64{10e6, 100e6} {
		median, use := bulkTCP(newAQM("codel", CoDel{}, 1000), rate, 30*time.Second)
		require.Less(t, median, 15*time.Millisecond, "%.0f Mbit/s: CoDel keeps the standing queue near 5 ms", rate/1e6)
		require.Greater(t, use, 0.9, "and the link busy")
		tail, tailUse := bulkTCP(newAQM("codel", CoDel{Target: time.Hour, Interval: time.Hour}, 1000), rate, 30*time.Second)
		require.Greater(t, tail, 50*time.Millisecond, "tail drop lets the queue stand")
		t.Logf("%.0f Mbit/s: median sojourn CoDel %s (link %.0f%% busy), tail drop %s (%.0f%%)", rate/1e6, median, 100*use, tail, 100*tailUse)
	}
}

// TestPIEHoldsItsTarget: the same bulk Reno flow through PIE: the
// median sojourn near its 15 ms target, the link busy (RFC 8033 §1:
// PIE trades a slightly longer queue than CoDel's for fewer drops).
func TestPIEHoldsItsTarget(t *testing.T) {
	testutil.Timed(t)
	for _, rate := range []float64{10e6, 100e6} {
		median, use := bulkTCP(newAQM("pie", CoDel{}, 1000), rate, 30*time.Second)
		require.Less(t, median, 30*time.Millisecond, "%.0f Mbit/s: PIE keeps the standing queue near 15 ms", rate/1e6)
		require.Greater(t, use, 0.9, "and the link busy")
		t.Logf("%.0f Mbit/s: median sojourn PIE %s (link %.0f%% busy)", rate/1e6, median, 100*use)
	}
}

// TestFQCoDelIsolatesASparseFlow: next to an unresponsive bulk flow 20 %
// above the link's rate, a sparse flow (a DNS query every 10 ms) waits
// less than one bulk packet's time under FQ-CoDel; under CoDel alone it
// waits behind the bulk flow's queue.
func TestFQCoDelIsolatesASparseFlow(t *testing.T) {
	rate := 10e6
	bulkGap := time.Duration(float64(1500*8) / (1.2 * rate) * float64(time.Second))
	run := func(q *aqmQueue) (sparse, bulk time.Duration) {
		base := time.Unix(0, 0)
		var s, b []time.Duration
		l := &aqmLink{q: q, serve: func(start time.Time, size int) time.Time {
			return start.Add(time.Duration(float64(size*8) / rate * float64(time.Second)))
		}}
		leave := func(p aqmPacket, out time.Time) {
			if p.arrival.Sub(base) < 2*time.Second {
				return
			}
			if p.size == 100 {
				s = append(s, out.Sub(p.arrival))
			} else {
				b = append(b, out.Sub(p.arrival))
			}
		}
		nextSparse := time.Duration(0)
		for at := time.Duration(0); at < 10*time.Second; at += bulkGap {
			for nextSparse <= at {
				l.run(base.Add(nextSparse), leave, func(aqmPacket) {})
				l.admit(aqmPacket{arrival: base.Add(nextSparse), size: 100, data: udpPacket(100, 2, 53)})
				nextSparse += 10 * time.Millisecond
			}
			l.run(base.Add(at), leave, func(aqmPacket) {})
			l.admit(aqmPacket{arrival: base.Add(at), size: 1500, data: udpPacket(1500, 1, 80)})
		}
		slices.Sort(s)
		slices.Sort(b)
		return s[len(s)/2], b[len(b)/2]
	}
	oneBulk := time.Duration(float64(1500*8) / rate * float64(time.Second))
	sparse, bulk := run(newAQM("fq_codel", CoDel{}, 1000))
	require.Less(t, sparse, oneBulk+50*time.Microsecond, "the sparse flow waits at most for the packet on the wire")
	sparseCoDel, _ := run(newAQM("codel", CoDel{}, 1000))
	require.Greater(t, sparseCoDel, 3*time.Millisecond, "behind the bulk flow's queue")
	require.Greater(t, bulk, sparse)
}

// TestExampleProfiles: every profile under examples/profiles loads.
func TestExampleProfiles(t *testing.T) {
	files, err := filepath.Glob("../examples/profiles/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		p, err := LookupProfile(f)
		require.NoError(t, err, f)
		require.Equal(t, strings.TrimSuffix(filepath.Base(f), ".yaml"), p.Name)
	}
	_, err = LookupProfile("../examples/profiles/../profiles/dsl-codel.yaml")
	require.NoError(t, err)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("down: {queue: red, rate: 1000000}\n"), 0o644))
	_, err = LookupProfile(bad)
	require.ErrorContains(t, err, `down.queue "red" is not tail, codel, fq_codel or pie`)
	require.NoError(t, os.WriteFile(bad, []byte("down: {queue: codel}\n"), 0o644))
	_, err = LookupProfile(bad)
	require.ErrorContains(t, err, "needs a rate or a trace")
}

package dnsrtt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// randomRows are n rows over a few resolvers, transports and conditions
// of two runs (one on a profile), some refused, timed out, cancelled or
// written around the finite check, each with what a real sample has.
func randomRows(rng *rand.Rand, n int) []store.Row {
	f := func(v float64) *float64 { return &v }
	rows := make([]store.Row, n)
	for i := range rows {
		r := store.Row{RunID: []string{"run-fiber", "run-wild"}[rng.IntN(2)], Target: fmt.Sprintf("192.0.2.%d", rng.IntN(3)),
			Transport: []string{"udp", "doq", "doh3"}[rng.IntN(3)], Condition: []string{"fresh", "resumed"}[rng.IntN(2)],
			Status: string(transport.StatusOK), Rcode: "NOERROR", BytesSent: 60, BytesReceived: 120, PacketsSent: 1, PacketsReceived: 1}
		if r.RunID == "run-fiber" {
			r.Profile = "fiber"
		}
		total := 5 + 40*rng.Float64()
		r.TotalMs, r.ProbeRTTMs = f(total), f(4+rng.Float64())
		r.TotalRTT, r.HandshakeRTT, r.ResolveRTT = f(total/4), f(rng.Float64()), f(1)
		if rng.IntN(3) == 0 {
			r.WireMs = f(total - rng.Float64())
		}
		switch rng.IntN(20) {
		case 0:
			r.Rcode = "REFUSED"
		case 1:
			r.Status, r.Rcode, r.TotalMs, r.TotalRTT = string(transport.StatusTimeout), "", nil, nil
		case 2:
			r.Status = string(transport.StatusCanceled)
		case 3:
			r.TotalRTT = f(math.Inf(1)) // written around the check
		}
		rows[i] = r
	}
	return rows
}

// TestReadersMergeAsOnePass: the cells two readers of the store gather
// apart and merge (LoadSamples) are the cells one pass gathers: the
// same counts, failures and order statistics, exactly while a cell's
// distributions are exact, and past stats.ExactLimit too (a sketch's
// buckets add up alike); and past MaxCells, the cells one reader never
// held apart are folded into OtherResolvers with every sample counted.
func TestReadersMergeAsOnePass(t *testing.T) {
	fiber, err := testbed.LookupProfile("fiber")
	require.NoError(t, err)
	profiles := map[string]testbed.Profile{"run-fiber": fiber}
	for _, n := range []int{500, 50 * stats.ExactLimit} { // 36 cells: a few hundred values each, then past the exact limit
		rows := randomRows(rand.New(rand.NewPCG(uint64(n), 7)), n)
		one := newCells(profiles, measure.DefaultAnswers())
		a, b := newCells(profiles, measure.DefaultAnswers()), newCells(profiles, measure.DefaultAnswers())
		for i := range rows {
			one.add(&rows[i])
			if i%3 == 0 { // readers take ranges of rows, not every other
				a.add(&rows[i])
			} else {
				b.add(&rows[i])
			}
		}
		a.merge(b)
		require.Equal(t, []int{one.skipped, one.canceled, one.folded}, []int{a.skipped, a.canceled, a.folded}, "n=%d", n)
		require.Len(t, a.order, len(one.order))
		sketched := false
		for _, want := range one.order {
			got := a.byKey[cellKey{want.Profile, want.Vantage, want.Target, want.Transport, want.Condition}]
			require.NotNil(t, got, "%+v", want)
			name := fmt.Sprintf("n=%d %s %s %s %s", n, want.Profile, want.Target, want.Transport, want.Condition)
			require.Equal(t, []int{want.N, want.Answered}, []int{got.N, got.Answered}, name)
			require.Equal(t, want.Failed, got.Failed, name)
			require.Equal(t, want.Link, got.Link, name)
			for i, d := range want.dists() {
				g := got.dists()[i]
				require.Equal(t, d.N(), g.N(), "%s: distribution %d", name, i)
				if d.N() == 0 {
					continue
				}
				require.Equal(t, d.Exact(), g.Exact(), "%s: distribution %d", name, i)
				sketched = sketched || !g.Exact()
				for _, q := range []float64{0.05, 0.5, 0.95} {
					require.InDelta(t, d.Quantile(q), g.Quantile(q), 1e-9, "%s: distribution %d, q%.2f", name, i, q)
				}
			}
		}
		require.Equal(t, n > 36*stats.ExactLimit, sketched, "n=%d: sketches compared too", n)
	}

	// Past MaxCells: each reader holds what it saw first; the merge folds
	// the rest, and every sample is still counted once.
	was := MaxCells
	MaxCells = 4
	defer func() { MaxCells = was }()
	rows := randomRows(rand.New(rand.NewPCG(3, 3)), 2000)
	a, b := newCells(profiles, measure.DefaultAnswers()), newCells(profiles, measure.DefaultAnswers())
	for i := range rows {
		if i < len(rows)/2 {
			a.add(&rows[i])
		} else {
			b.add(&rows[i])
		}
	}
	a.merge(b)
	n, held := 0, 0
	for _, g := range a.order {
		n += g.N
		if g.Target != OtherResolvers {
			held++
		}
	}
	require.Equal(t, len(rows)-a.skipped-a.canceled, n, "every sample counted once")
	require.LessOrEqual(t, held, MaxCells, "no more cells held apart than the bound")
	require.Positive(t, a.folded)
}

// TestResolversRankedWithinTheirTransport: resolvers rank by their
// median total within a transport and condition; one whose order is
// noise says so against the fastest, one really slower says by how
// much; a resolver that answered nothing (timeouts, or only rcodes not
// taken as answers) has no rank, comes last and is counted by what it
// failed with; an rcode not taken is never timed.
func TestResolversRankedWithinTheirTransport(t *testing.T) {
	var rows []store.Row
	add := func(host string, ms float64, n int, change func(*store.Row)) {
		for i := range n {
			r := row(host, ms+float64(i%5)/10)
			if change != nil {
				change(&r)
			}
			rows = append(rows, r)
		}
	}
	add("slow.example", 50, 20, nil)
	add("fast.example", 10, 20, nil)
	add("close.example", 10.05, 20, nil)
	add("refusing.example", 1, 10, func(r *store.Row) { r.Rcode = "REFUSED" })
	add("silent.example", 0, 10, func(r *store.Row) { r.Status, r.TotalMs, r.TotalRTT = string(transport.StatusTimeout), nil, nil })
	add("fast.example", 3, 4, func(r *store.Row) { r.Rcode = "REFUSED" }) // fast at refusing: not timed
	var got []string
	for _, x := range NewSamples(rows, nil).ByResolver() {
		got = append(got, fmt.Sprintf("%s %s n=%d ok=%d %v | %s", x.RankText(), x.Target, x.N, x.OK, x.Failed, x.VsText()))
	}
	require.Len(t, got, 5)
	require.Equal(t, "1 fast.example n=24 ok=20 map[REFUSED:4] | fastest", got[0])
	require.Regexp(t, `^2 close.example n=20 ok=20 map\[\] \| ~ \(p=`, got[1])
	require.Regexp(t, `^3 slow.example n=20 ok=20 map\[\] \| \+\d+\.\d % \(p=`, got[2])
	require.ElementsMatch(t, []string{"– refusing.example n=10 ok=0 map[REFUSED:10] | nothing answered", "– silent.example n=10 ok=0 map[timeout:10] | nothing answered"}, got[3:])
}

// TestVantagePanelsAreTheMostMeasured: past MaxVantagePanels vantage
// points, the figure's panels are the most measured ones, in the
// order of their names; below it, every one.
// A vantage point is said by what is known of it, in a fixed order.
func TestVantagePanelsAreTheMostMeasured(t *testing.T) {
	var rows []store.Row
	for v := 1; v <= MaxVantagePanels+3; v++ {
		for range v { // vp15 is measured most, vp1 least
			r := row("192.0.2.1", 10)
			r.Vantage = fmt.Sprintf("vp%d", v)
			rows = append(rows, r)
		}
	}
	s := NewSamples(rows, nil)
	require.Len(t, s.vantages(), MaxVantagePanels+3)
	want := []string{}
	for v := 4; v <= MaxVantagePanels+3; v++ {
		want = append(want, fmt.Sprintf("vp%d", v))
	}
	slices.SortFunc(want, order.Compare)
	require.Equal(t, want, s.panelVantages())
	require.Equal(t, []string{"vp1", "vp2"}, NewSamples(rows[:3], nil).panelVantages())

	require.Equal(t, "Frankfurt, DE, Example Net, AS64500, 10.200.0.1",
		where(&store.Row{VantageAddress: "10.200.0.1", VantageASN: 64500, VantageNetwork: "Example Net", VantageLocation: "Frankfurt, DE"}))
	require.Equal(t, "AS64500", where(&store.Row{VantageASN: 64500}))
	require.Empty(t, where(&store.Row{}))
}

// TestStatsPoolEveryResolverAndVantage: the report's table is one row
// per profile, transport and condition, over every resolver and vantage
// point, in the profiles' and then the conditions' and transports'
// order, a real network's samples under "none" (first, as the profile
// that shapes nothing); the wire and client
// times only where the records have wire times, NaN elsewhere.
func TestStatsPoolEveryResolverAndVantage(t *testing.T) {
	var rows []store.Row
	add := func(profile, vantage, target, tr, cond string, ms float64, wire bool) {
		for i := range 4 {
			r := row(target, ms+float64(i))
			r.Profile, r.Vantage, r.Transport, r.Condition = profile, vantage, tr, cond
			if wire {
				w := ms + float64(i) - 2
				r.WireMs = &w
			}
			rows = append(rows, r)
		}
	}
	add("dsl", "", "a", "doq", "resumed", 60, false)
	add("fiber", "", "a", "doq", "fresh", 20, true)
	add("fiber", "", "b", "doq", "fresh", 30, true)
	add("fiber", "", "a", "udp", "fresh", 10, false)
	add("", "fra", "a", "udp", "fresh", 12, false)
	add("", "sin", "b", "udp", "fresh", 14, false)
	var got []string
	for _, x := range NewSamples(rows, nil).Stats() {
		got = append(got, fmt.Sprintf("%s %s %s n=%d median=%g wire=%g client=%g", x.Profile, x.Transport, x.Condition, x.N, x.MedianMs, x.WireMs, x.ClientMs))
	}
	require.Equal(t, []string{
		"none udp fresh n=8 median=14.5 wire=NaN client=NaN",
		"fiber udp fresh n=4 median=11.5 wire=NaN client=NaN",
		"fiber doq fresh n=8 median=26.5 wire=24.5 client=2",
		"dsl doq resumed n=4 median=61.5 wire=NaN client=NaN",
	}, got)
}

// TestEachRowTakesItsRunsLink: rows of two runs recorded on links of the
// same name but other rates, interleaved in one cell (a campaign's runs
// read from their rows), each cost the serialization of its own run's
// link; a datagram transport's headers are UDP's, a stream's TCP's.
func TestEachRowTakesItsRunsLink(t *testing.T) {
	profiles := map[string]testbed.Profile{
		"run-a": {Name: "fiber", Up: testbed.Direction{Rate: 1e6}, Down: testbed.Direction{Rate: 8e6}},
		"run-b": {Name: "fiber", Up: testbed.Direction{Rate: 8e6}, Down: testbed.Direction{Rate: 1e6}},
	}
	f := func(v float64) *float64 { return &v }
	for _, tr := range []string{"udp", "dot"} {
		cs := newCells(profiles, measure.DefaultAnswers())
		var want []float64
		for i := range 12 {
			r := store.Row{RunID: []string{"run-a", "run-b", "run-b"}[i%3], Profile: "fiber", Target: "192.0.2.1", Transport: tr, Condition: "fresh",
				Status: string(transport.StatusOK), Rcode: "NOERROR", BytesSent: int64(60 + i), BytesReceived: 900, PacketsSent: 1, PacketsReceived: 2,
				TotalMs: f(10), TotalRTT: f(1)}
			cs.add(&r)
			want = append(want, SerializationMs(r, profiles[r.RunID]))
		}
		require.Len(t, cs.order, 1, "one cell")
		got, ok := cs.order[0].Serial.Values()
		require.True(t, ok)
		slices.Sort(want)
		require.Equal(t, want, got, "%s: each row's serialization at its run's rates", tr)
	}
}

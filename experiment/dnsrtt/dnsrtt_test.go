package dnsrtt

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

func TestExpected(t *testing.T) {
	for _, c := range []struct {
		tr, cond string
		want     float64
	}{{"udp", "fresh", 1}, {"tcp", "fresh", 2}, {"dot", "fresh", 3}, {"doh2", "resumed", 3}, {"doq", "fresh", 2}, {"doh3", "resumed", 2}, {"doq", "0rtt", 1}} {
		require.Equal(t, c.want, Expected(c.tr, c.cond), "%s %s", c.tr, c.cond)
	}
}

func TestSummarizeMediansPerCell(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	for _, p := range []string{"fiber", "dsl"} {
		prof, err := testbed.LookupProfile(p)
		require.NoError(t, err)
		// As Run records it: the whole profile in the run's spec.
		run := store.NewRun("experiment:dns-rtt", p, map[string]any{"profile": prof})
		run.ID = "exp1-" + p
		require.NoError(t, st.BeginRun(ctx, run))
		for i, total := range []float64{2.1, 2.3, 2.2} {
			require.NoError(t, st.Write(ctx, run.ID, &measure.Sample{
				Task:  measure.Task{URL: "quic://x", Transport: "doq", Condition: "fresh", Rep: i},
				Start: time.Unix(int64(i), 0),
				Measure: &transport.Record{Status: transport.StatusOK, Answers: []string{},
					Bytes: transport.Counts{Sent: 2400, Received: 4000}, Packets: transport.Counts{Sent: 2, Received: 4}},
				Status: transport.StatusOK, RTTs: &measure.InRTTs{Handshake: 1.1, Resolve: 1, Total: total},
			}))
		}
	}
	samples, err := LoadSamples(ctx, st, store.Filter{RunPrefix: "exp1-"})
	require.NoError(t, err)
	sums := samples.Summarize()
	require.Len(t, sums, 2)
	require.Equal(t, "fiber", sums[0].Profile, "profiles in Table II's order")
	require.Equal(t, 2.2, sums[0].Total)
	require.Equal(t, 3, sums[0].OK)
	require.Equal(t, 2.0, sums[0].Expected)
	// DSL: 2400 octets in 2 datagrams up at 0.8 Mbit/s, 4000 in 4 down at
	// 10.7 Mbit/s, with 28 octets of IPv4 and UDP each: 24.56 + 3.07 ms,
	// 0.652 of its 42.4 ms RTT.
	require.Equal(t, "dsl", sums[1].Profile)
	require.InDelta(t, 0.652, sums[1].Serialization, 0.001)
	require.InDelta(t, 0.0344, sums[0].Serialization, 0.0005, "fiber: 0.51 ms of 14.8")
	other, err := LoadSamples(ctx, st, store.Filter{RunPrefix: "exp2-"})
	require.NoError(t, err)
	require.Empty(t, other.Summarize(), "only this experiment's runs")
}

// TestVantagesInTheReport stores a campaign's samples from two vantage
// points: the section gains the per-vantage table and figure, and the
// text table the per-vantage lines.
func TestVantagesInTheReport(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	run := store.NewRun("campaign", "", map[string]any{})
	require.NoError(t, st.BeginRun(ctx, run))
	for i, v := range []measure.Vantage{{Name: "fra1", Location: "Frankfurt, DE", ASN: 64500, Address: "192.0.2.1"}, {Name: "nyc1"}} {
		for rep, total := range []float64{20, 30, 40} {
			ms, probe := total*float64(i+1), 10*float64(i+1)
			require.NoError(t, st.Write(ctx, run.ID, &measure.Sample{
				Task:    measure.Task{URL: "udp://10.0.0.53:53", Target: "10.0.0.53", Transport: "udp", Condition: "fresh", Rep: rep},
				Start:   time.Unix(int64(rep), 0),
				Measure: &transport.Record{Status: transport.StatusOK, Answers: []string{}, Timing: transport.Timing{TotalMs: ms}},
				Probe:   &measure.ProbeResult{RTTMs: probe}, Status: transport.StatusOK, RTTs: &measure.InRTTs{Total: ms / probe},
				Vantage: &v,
			}))
		}
	}
	samples, err := LoadSamples(ctx, st, store.Filter{})
	require.NoError(t, err)
	by := samples.ByVantage()
	require.Len(t, by, 2)
	fra := by[0]
	require.Equal(t, 3, fra.Ms.N)
	require.False(t, fra.Ms.Bounded(), "3 samples have no 95 % interval")
	require.Equal(t, 3.0, fra.RTT.Median)
	require.Equal(t, 10.0, fra.Probe.Median)
	fra.Ms, fra.RTT, fra.Probe = stats.Summary{}, stats.Summary{}, stats.Summary{}
	require.Equal(t, VantageStat{Vantage: "fra1", Where: "Frankfurt, DE, AS64500, 192.0.2.1", Target: "10.0.0.53", Transport: "udp", N: 3, OK: 3, Failed: map[string]int{},
		ProbeMs: 10, MedianMs: 30, P95Ms: 39, MedianRTT: 3, P95RTT: 3.9}, fra)
	require.Equal(t, 60.0, by[1].MedianMs)
	sec, err := samples.Section(t.TempDir())
	require.NoError(t, err)
	require.Contains(t, string(sec.Table), `id="vantages"`)
	require.Contains(t, string(sec.Table), "Frankfurt, DE")
	require.True(t, slices.ContainsFunc(sec.Files, func(f string) bool { return strings.HasSuffix(f, "cdf-total-by-vantage.png") }), "%v", sec.Files)
	var b strings.Builder
	require.NoError(t, samples.WriteTable(&b))
	require.Contains(t, b.String(), "nyc1")

	// A vantage point's samples alone, selected in the query.
	nyc, err := LoadSamples(ctx, st, store.Filter{RunPrefix: run.ID, Vantage: "nyc1"})
	require.NoError(t, err)
	by = nyc.ByVantage()
	require.Len(t, by, 1)
	require.Equal(t, "nyc1", by[0].Vantage)
	require.Equal(t, 60.0, by[0].MedianMs)
	none, err := LoadSamples(ctx, st, store.Filter{Vantage: "ams1"})
	require.NoError(t, err)
	n, _ := none.Count()
	require.Zero(t, n)
	vs, err := st.Vantages(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"fra1", "nyc1"}, vs)
}

// TestRTTFindingsNeedAnEmulatedLink: loopback's RTT is tens of
// microseconds, so a claim in round trips earns no verdict there.
func TestRTTFindingsNeedAnEmulatedLink(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	var rows []store.Row
	for i := range 10 {
		for tr, rtts := range map[string]float64{"udp": 5.7, "doq": 20, "doh2": 30} {
			rows = append(rows, store.Row{RunID: "m1", Transport: tr, Condition: "fresh", Status: "ok", TotalRTT: f(rtts + float64(i)/10)})
		}
	}
	fs := NewSamples(rows, nil).Findings()
	require.Equal(t, experiment.Differs, fs[0].Verdict, "loopback's DoUDP is 5.7 of its tiny RTTs")
	earned := experiment.Earn(fs, experiment.Evidence{})
	for _, e := range earned {
		require.Equal(t, experiment.Inconclusive, e.Verdict, e.Claim)
		require.Contains(t, e.Reason, "measured on loopback")
	}
	// The same on a profile: earned.
	for i := range rows {
		rows[i].Profile = "fiber"
		if rows[i].Transport == "udp" {
			rows[i].TotalRTT = f(1 + float64(i%10)/100)
		}
	}
	earned = experiment.Earn(NewSamples(rows, nil).Findings(), experiment.Evidence{})
	require.Equal(t, experiment.Holds, earned[0].Verdict, earned[0].Reason)
	require.Equal(t, experiment.Differs, earned[1].Verdict, "DoH 10 RTT above DoQ, significantly: %s", earned[1].Reason)
}

// TestLoopbackStaysOutOfThePool: loopback's exchanges (tens of its tiny
// RTTs) get a panel of their own, not a place in the pooled one.
func TestLoopbackStaysOutOfThePool(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	var rows []store.Row
	for i := range 5 {
		rows = append(rows,
			store.Row{RunID: "m", Transport: "udp", Condition: "fresh", Status: "ok", TotalRTT: f(30 + float64(i))},
			store.Row{RunID: "e-fiber", Profile: "fiber", Transport: "udp", Condition: "fresh", Status: "ok", TotalRTT: f(1 + float64(i)/100)})
	}
	dir := t.TempDir()
	sec, err := NewSamples(rows, nil).Section(dir)
	require.NoError(t, err)
	require.Equal(t, "over the emulated profiles, then each (loopback, none, apart: its RTT is tens of microseconds)", sec.Figures[0].Of)
	b, err := os.ReadFile(filepath.Join(dir, "cdf-total.csv"))
	require.NoError(t, err)
	pooled := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "all emulated,") {
			pooled++
			require.NotContains(t, line, ",3", "no loopback value in the pool: %s", line)
		}
	}
	require.Equal(t, 5, pooled)
}

// TestOnlyAnswersAreTimed: the report reads every row's status and
// rcode, so a failure that carries a time (an edited or imported store)
// or an answer that refuses is counted by what it failed with, never in
// a median; old stores, without rcodes, are read by their status.
func TestOnlyAnswersAreTimed(t *testing.T) {
	var rows []store.Row
	for i := range 17 {
		rows = append(rows, row("a.example", 1+float64(i)/100))
	}
	for range 3 {
		timedOut := row("a.example", 10000)
		timedOut.Status = "timeout"
		rows = append(rows, timedOut)
	}
	refused := row("a.example", 0.1)
	refused.Status, refused.Rcode = "rcode-error", "REFUSED"
	oldServfail := row("a.example", 0.1) // an old store: no rcode
	oldServfail.Status = "servfail"
	nx := row("a.example", 1.08)
	nx.Status, nx.Rcode = "nxdomain", "NXDOMAIN"
	canceled := row("a.example", 0)
	canceled.Status = "canceled"
	rows = append(rows, refused, oldServfail, nx, canceled)

	s := NewSamples(rows, nil)
	st := s.Stats()
	require.Len(t, st, 1)
	require.Equal(t, 23, st[0].N, "cancelled tasks are no samples")
	require.Equal(t, 18, st[0].OK, "the NXDOMAIN answers")
	require.Equal(t, map[string]int{"timeout": 3, "REFUSED": 1, "SERVFAIL": 1}, st[0].Failed)
	require.Less(t, st[0].P95Ms, 1.2, "no timeout in the p95")
	require.Equal(t, 1, s.Canceled)
	var out strings.Builder
	require.NoError(t, s.WriteTable(&out))
	require.Contains(t, out.String(), "timeout 3, REFUSED 1, SERVFAIL 1")
}

// TestLargeComparisonsNearTheThresholdAreExact: two resolvers of 4,600
// samples each, past the exact limit, apart by a shift the 0.1 % bins
// cannot see: where the binned test cannot tell, the report reads the
// values again and gives the exact test's p and verdict.
func TestLargeComparisonsNearTheThresholdAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	checked := 0
	for trial := 0; trial < 40 && checked < 3; trial++ {
		shift := 1 + float64(trial%20)*0.0002
		var rows []store.Row
		var a, b []float64
		for range stats.ExactLimit + 500 {
			x, y := 10*math.Exp(rng.NormFloat64()*0.05), 10*math.Exp(rng.NormFloat64()*0.05)*shift
			a, b = append(a, x), append(b, y)
			rows = append(rows, row("a.example", x), row("b.example", y))
		}
		binned := stats.CompareDists(dist(a), dist(b))
		if !binned.Undecided() {
			continue
		}
		checked++
		rs := NewSamples(rows, nil).ByResolver()
		require.Len(t, rs, 2)
		slow := rs[1]
		require.False(t, slow.VsFastest.Approx, "read again, exactly")
		base, other := a, b
		if rs[0].Target == "b.example" {
			base, other = b, a
		}
		require.InDelta(t, stats.MannWhitneyP(base, other), slow.VsFastest.P, 1e-12)
		require.NotContains(t, slow.VsText(), "?")
	}
	require.Positive(t, checked, "no trial left the binned test undecided")
}

func dist(v []float64) *stats.Dist {
	d := stats.NewDist()
	for _, x := range v {
		d.Add(x)
	}
	return d
}

// TestResolverTableGroupsResolvers: with every row shown, each
// resolver's transports are together (resolvers by name, transports in
// the protocol table's order); the rank still says where each stands
// within its transport.
func TestResolverTableGroupsResolvers(t *testing.T) {
	var rows []store.Row
	add := func(host, tr, url string, ms float64) {
		for i := range 5 {
			r := row(host, ms+float64(i)/10)
			r.Transport, r.URL = tr, url
			rows = append(rows, r)
		}
	}
	add("b.example", "doq", "quic://b.example", 30)
	add("b.example", "udp", "udp://b.example", 5)
	add("a.example", "doq", "quic://a.example", 20)
	add("a.example", "udp", "udp://a.example", 10)
	shown, left := NewSamples(rows, nil).shownResolvers()
	require.Zero(t, left)
	var got []string
	for _, x := range shown {
		got = append(got, fmt.Sprintf("%s %s %d", x.Target, x.Transport, x.Rank))
	}
	require.Equal(t, []string{"a.example udp 2", "a.example doq 1", "b.example udp 1", "b.example doq 2"}, got)
}

// TestSerializationAtTheLinksRates: a sample's packets cross the up rate
// as sent and the down rate as received, each with its headers (IPv4 and
// UDP for datagram protocols, IPv4 and TCP with timestamps otherwise); a
// link without a rate costs nothing.
func TestSerializationAtTheLinksRates(t *testing.T) {
	link := testbed.Profile{Up: testbed.Direction{Rate: 1e6}, Down: testbed.Direction{Rate: 8e6}}
	udp := store.Row{Transport: "udp", BytesSent: 72, PacketsSent: 1, BytesReceived: 972, PacketsReceived: 1}
	// (72+28)·8 bits at 1 Mbit/s = 0.8 ms up; (972+28)·8 at 8 Mbit/s = 1 ms down.
	require.InDelta(t, 1.8, SerializationMs(udp, link), 1e-9)
	tcp := store.Row{Transport: "dot", BytesSent: 48, PacketsSent: 2, BytesReceived: 948, PacketsReceived: 1}
	// (48+2·52)·8 at 1 Mbit/s = 1.216 ms; (948+52)·8 at 8 Mbit/s = 1 ms.
	require.InDelta(t, 2.216, SerializationMs(tcp, link), 1e-9)
	require.Zero(t, SerializationMs(udp, testbed.Profile{}), "no rate, no serialization")
}

// TestStoredProfilesAsRun: each run's profile is read from its own spec
// (a custom profile as it was run); runs on real networks have none.
func TestStoredProfilesAsRun(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	require.NoError(t, err)
	defer st.Close()
	custom := testbed.Profile{Name: "my-dsl", Down: testbed.Direction{Delay: 12 * time.Millisecond, Rate: 16e6}}
	emulated := store.NewRun("experiment:dns-rtt", "", map[string]any{"profile": custom})
	wild := store.NewRun("measure", "", map[string]any{"targets": []string{"udp://192.0.2.1"}})
	require.NoError(t, st.BeginRun(ctx, emulated))
	require.NoError(t, st.BeginRun(ctx, wild))
	got, err := StoredProfiles(ctx, st)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, custom.Down, got[emulated.ID].Down)
	require.Equal(t, "my-dsl", got[emulated.ID].Name)
}

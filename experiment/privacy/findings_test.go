package privacy

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/transport"
)

// cell is five ok samples of one part × rung × condition on a link of
// 20 ms RTT, its proxy's link 10 ms, their times ±2 ms around ms.
func cell(profile, part, rung, cond string, ms float64) []*Sample {
	var ss []*Sample
	for i := range 5 {
		s := &Sample{Profile: profile, Part: part, Rung: rung, Condition: cond, Rep: i, RTTMs: 20, ProxyRTTMs: 10, Status: "ok", Ms: ms + float64(i-2)}
		s.RTTs = s.Ms / s.RTTMs
		ss = append(ss, s)
	}
	return ss
}

// finding is the claim starting with prefix, after Earn.
func finding(t *testing.T, ss Samples, prefix string) experiment.Finding {
	t.Helper()
	fs := experiment.Earn(ss.Findings(), experiment.Evidence{})
	require.Len(t, fs, 5)
	i := slices.IndexFunc(fs, func(f experiment.Finding) bool { return strings.HasPrefix(f.Claim, prefix) })
	require.GreaterOrEqual(t, i, 0, "no finding %q", prefix)
	return fs[i]
}

// TestODoHCostsTheDetour: ODoH's extra time over DoH on kept connections
// is read against the detour through the proxy (twice its link's RTT,
// here 20 ms), give or take a quarter of it and 1 ms (6 ms); the same
// samples on the loopback net earn no verdict, a claim in round trips
// with none to rest on.
func TestODoHCostsTheDetour(t *testing.T) {
	const claim = "Oblivious DoH costs DoH plus the detour"
	with := func(profile string, odoh float64) Samples {
		return slices.Concat(cell(profile, "dns", protocol.DoH2, "reused", 21), cell(profile, "dns", protocol.ODoH, "reused", odoh))
	}
	f := finding(t, with("fiber", 43), claim)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "on kept connections: DoH 21.00 ms, ODoH 43.00 ms, 22.00 ms more; the detour is 20.00 ms (proxy link 10.00 ms RTT)", f.Here)
	require.Equal(t, "holds when ODoH's extra time is the detour ± 6.00 ms (a quarter of it and 1 ms)", f.Why)
	require.Equal(t, experiment.Differs, finding(t, with("fiber", 49), claim).Verdict, "8 ms past the detour")
	require.Equal(t, experiment.Differs, finding(t, with("fiber", 33), claim).Verdict, "a proxy that costs less than its link cannot be")

	f = finding(t, with("none", 43), claim)
	require.Equal(t, experiment.Inconclusive, f.Verdict)
	require.Contains(t, f.Reason, "measured on loopback")

	// Resumed and fresh lookups are not the claim's: only kept connections.
	f = finding(t, slices.Concat(cell("fiber", "dns", protocol.DoH2, "fresh", 60), cell("fiber", "dns", protocol.ODoH, "fresh", 100)), claim)
	require.Equal(t, experiment.NoData, f.Verdict)
}

// TestECHRoundTrips: ECH with a current config adds no round trip to a
// new connection or a 0-RTT one (within a quarter RTT); a stale config
// adds one (0.5-1.5 RTT more, significant); failed samples count for
// nothing.
func TestECHRoundTrips(t *testing.T) {
	web := func(clear, withECH, clear0, withECH0, stale float64) Samples {
		return slices.Concat(cell("fiber", "web", Clear, "fresh", clear), cell("fiber", "web", ECH, "fresh", withECH),
			cell("fiber", "web", Clear, "0rtt", clear0), cell("fiber", "web", ECH, "0rtt", withECH0),
			cell("fiber", "web", ECHStale, "fresh", stale))
	}
	const current, keeps, stale = "ECH adds no round trip when its config is current", "ECH keeps 0-RTT", "ECH with a stale config costs one more"
	ss := web(41, 43, 21, 22, 62)
	f := finding(t, ss, current)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "new HTTP/3 connection to the page: in clear 2.05 RTT, with ECH 2.15 RTT (+0.10)", f.Here)
	require.Equal(t, experiment.Holds, finding(t, ss, keeps).Verdict)
	f = finding(t, ss, stale)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "stale config 3.10 RTT, current 2.15 RTT: 0.95 RTT more", f.Here)

	// A current config that costs a round trip; 0-RTT lost to ECH; a
	// stale config retried at no cost (the retry is not measured).
	ss = web(41, 61, 21, 41, 62)
	require.Equal(t, experiment.Differs, finding(t, ss, current).Verdict)
	require.Equal(t, experiment.Differs, finding(t, ss, keeps).Verdict)
	f = finding(t, ss, stale)
	require.Equal(t, experiment.Inconclusive, f.Verdict, "the stale cell cannot be told from the current one")
	require.Contains(t, f.Reason, "not significant")

	// Three of the stale cell's five failed: too few to carry a verdict.
	ss = web(41, 43, 21, 22, 62)
	for _, s := range ss[20:23] {
		s.Status = "error"
	}
	f = finding(t, ss, stale)
	require.Equal(t, experiment.Inconclusive, f.Verdict)
	require.Contains(t, f.Reason, "too few samples (n=2")
}

// TestPageECHFinding reads doxlab's loader's page loads over DoH with
// warm DNS, the rung with ECH against the one in clear.
func TestPageECHFinding(t *testing.T) {
	const claim = "ECH costs a page load no round trip"
	with := func(clear, withECH float64) Samples {
		return slices.Concat(cell("fiber", "page", pageRung(protocol.DoH2, false), "warm", clear), cell("fiber", "page", pageRung(protocol.DoH2, true), "warm", withECH))
	}
	require.Equal(t, experiment.Holds, finding(t, with(80, 82), claim).Verdict)
	require.Equal(t, experiment.Differs, finding(t, with(80, 100), claim).Verdict)
	require.Equal(t, experiment.NoData, finding(t, cell("fiber", "page", pageRung(protocol.DoQ, true), "warm", 80), claim).Verdict,
		"DoQ's page rung is not the claim's")
}

// TestSummarizeFollowsTheLadder: cells come by profile, then the ladder
// (dns, web, page, browser, each in its list's order), whatever order the
// samples were stored in; the shares are of the ok samples and ODoH's
// cells carry the proxy's target exchange and the sealed octets.
func TestSummarizeFollowsTheLadder(t *testing.T) {
	odoh := cell("fiber", "dns", protocol.ODoH, "reused", 43)
	for i, s := range odoh {
		s.ODoH = &transport.ODoHFacts{TargetMs: 20 + float64(i), Sealed: transport.Counts{Sent: 100, Received: 200}}
	}
	web := cell("fiber", "web", ECHStale, "fresh", 62)
	for i, s := range web {
		s.OuterSNI, s.Retried, s.ECH = publicName, i > 0, []string{ech.Rejected, ech.Accepted}
	}
	web[0].Status = "error"
	ss := slices.Concat(web, cell("cable", "dns", protocol.UDP, "fresh", 30), odoh, cell("fiber", "dns", protocol.UDP, "fresh", 21))
	cells := Summarize(ss)
	var got []string
	for _, c := range cells {
		got = append(got, c.Profile+" "+c.Part+" "+c.Rung+" "+c.Condition)
	}
	require.Equal(t, []string{"fiber dns udp fresh", "fiber dns odoh reused", "fiber web ech-stale fresh", "cable dns udp fresh"}, got)
	o := cells[1]
	require.Equal(t, 22.0, o.TargetStat.Median)
	require.Equal(t, 300.0, o.SealedStat.Median)
	w := cells[2]
	require.Equal(t, 5, w.N)
	require.Equal(t, 4, w.OK)
	require.Equal(t, 1.0, w.Retried, "every ok sample retried")
	require.Equal(t, 1.0, w.Accepted)
	require.Equal(t, []string{publicName}, w.OuterNames)
	require.Equal(t, "ECH, stale config", w.Label)
}

// TestCellsAndTableSayEachPart: the report's cells are each table cell's
// milliseconds and round trips, with the proxy's target exchange only
// where the rung went through a proxy; the text table says what the
// server saw as fits the part (nothing for a lookup, the shares of ECH
// accepted, retried and 0-RTT for the web handshakes).
func TestCellsAndTableSayEachPart(t *testing.T) {
	odoh := cell("fiber", "dns", protocol.ODoH, "fresh", 43)
	for _, s := range odoh {
		s.ODoH = &transport.ODoHFacts{TargetMs: 20}
	}
	web := cell("fiber", "web", ECH, "0rtt", 30)
	for i, s := range web {
		s.ECH, s.Used0RTT, s.OuterSNI = []string{ech.Accepted}, i < 4, publicName
	}
	ss := Samples(slices.Concat(cell("fiber", "dns", protocol.UDP, "fresh", 21), odoh, web))
	var metrics []string
	for _, c := range ss.Cells() {
		require.Equal(t, "privacy", c.Table)
		require.Equal(t, 5, c.Samples)
		metrics = append(metrics, c.Keys["rung"]+" "+c.Metric)
	}
	require.Equal(t, []string{"udp ms", "udp rtts", "odoh ms", "odoh rtts", "odoh proxy_target_ms", "ech ms", "ech rtts"}, metrics)
	var b strings.Builder
	require.NoError(t, ss.WriteTable(&b))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 5, "a header, its columns, a line per cell")
	require.NotContains(t, lines[2], "ECH accepted", "a lookup's server sees no ECH")
	require.Contains(t, lines[4], "ECH accepted 100 %, retried 0 %, 0-RTT 80 %, outer [public.test]")
	n, what := ss.Count()
	require.Equal(t, 15, n)
	require.Equal(t, "lookups, handshakes and page loads", what)
}

// TestSignedSaysARoundedZeroPlain: a difference that rounds to zero is
// +0.00, never -0.00.
func TestSignedSaysARoundedZeroPlain(t *testing.T) {
	require.Equal(t, "+0.00", signed(-0.004))
	require.Equal(t, "+0.00", signed(0))
	require.Equal(t, "-0.01", signed(-0.006))
	require.Equal(t, "+1.25", signed(1.25))
}

// TestPageTargetOfTheCoalescedRung: a page rung's lookups go to its DNS
// transport's URL, the coalesced rung's to the page's own web listener.
func TestPageTargetOfTheCoalescedRung(t *testing.T) {
	urls := map[string]string{protocol.DoQ: "quic://10.0.0.2:853"}
	require.Equal(t, "quic://10.0.0.2:853", pageTarget(urls, protocol.DoQ, "10.0.0.2"))
	require.Equal(t, "10.0.0.2:8443", pageTarget(urls, Coalesced, "10.0.0.2"))
	require.Equal(t, "udp+clear", pageRung(protocol.UDP, false))
	require.Equal(t, "coalesced+ech", dnsECH{Coalesced, true}.rung())
}

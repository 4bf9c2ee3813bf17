package coalescing

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/testbed"
)

// loads are five ok loads of one cell, their PLTs spread ±2 ms around
// plt, each proved as a coalesced load is (one QUIC handshake, one
// lookup on the page's connection) when the mode coalesces.
func loads(profile, dns, h3, settings string, plt float64) Samples {
	var ss Samples
	for i := range 5 {
		s := &Sample{Task: Task{Profile: profile, Page: "wiki", DNS: dns, H3: h3, Settings: settings, Rep: i}, Status: "ok", PLTMs: plt + float64(i-2)}
		s.Proof.QUICHandshakes, s.Proof.Lookups = 1, 1
		if !Coalesced(dns) {
			s.Proof.QUICHandshakes = 2
		}
		ss = append(ss, s)
	}
	return ss
}

// claim is the finding whose claim starts with prefix, after Earn.
func claim(t *testing.T, ss Samples, prefix string) experiment.Finding {
	t.Helper()
	fs := experiment.Earn(ss.Findings(), experiment.Evidence{})
	i := slices.IndexFunc(fs, func(f experiment.Finding) bool { return strings.HasPrefix(f.Claim, prefix) })
	require.GreaterOrEqual(t, i, 0, "no finding %q", prefix)
	return fs[i]
}

// rttMs is a profile's round trip in milliseconds.
func rttMs(profile string) float64 {
	return float64(testbed.Profiles[profile].RTT()) / float64(time.Millisecond)
}

// TestTakenBackShareByAccess: the paper's share of DoH's cost that
// coalescing takes back is a third on fixed lines and half on mobile
// ones; the best coalesced 0-RTT mode counts, and a page where DoH costs
// nothing holds if coalescing costs no more.
func TestTakenBackShareByAccess(t *testing.T) {
	const gain = "Coalescing DNS and web in 0-RTT takes back"
	// DoH/2 + H3 1-RTT is 20 % over DoUDP's 400 ms; a coalesced mode
	// at 448 ms (+12 %) takes 0.4 of it back, one at 500 ms none.
	tuple := func(profile string, coalesced float64) Samples {
		return slices.Concat(loads(profile, "udp", "1rtt", "", 400), loads(profile, "doh2", "1rtt", "", 480),
			loads(profile, DoH3Coalesced, "0rtt", "remembered", coalesced), loads(profile, DNSStream, "0rtt", "remembered", 500))
	}
	f := claim(t, tuple("fiber", 448), gain)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "1 of 1 (page, profile): wiki/fiber 40% of +20.0%", f.Here)
	require.Equal(t, 5, f.N)
	require.Equal(t, experiment.Differs, claim(t, tuple("4g", 448), gain).Verdict, "mobile lines want half")
	require.Equal(t, experiment.Holds, claim(t, tuple("4g", 430), gain).Verdict)
	f = claim(t, slices.Concat(tuple("fiber", 448), tuple("cable", 500)), gain)
	require.Equal(t, experiment.Differs, f.Verdict, "every (page, profile) must hold")
	require.Contains(t, f.Here, "1 of 2 (page, profile)")

	// DoH costs under 1 %: holds when coalescing costs no more.
	flat := func(coalesced float64) Samples {
		return slices.Concat(loads("fiber", "udp", "1rtt", "", 400), loads("fiber", "doh2", "1rtt", "", 402),
			loads("fiber", DNSStream, "0rtt", "remembered", coalesced))
	}
	require.Equal(t, experiment.Holds, claim(t, flat(401), gain).Verdict)
	require.Equal(t, experiment.Differs, claim(t, flat(410), gain).Verdict)

	f = claim(t, loads("fiber", "udp", "1rtt", "", 400), gain)
	require.Equal(t, experiment.NoData, f.Verdict)
	require.Contains(t, f.Here, "no (page, profile) with DoH/2")
}

// TestEncryptedDNSAtNoCost: coalesced + 0-RTT holds within +1 % of
// DoUDP + H3 0-RTT and differs past it; a cell of two loads earns no
// verdict.
func TestEncryptedDNSAtNoCost(t *testing.T) {
	const free = "Encrypted DNS at no cost"
	with := func(coalesced float64) Samples {
		return slices.Concat(loads("fiber", "udp", "0rtt", "remembered", 300), loads("fiber", DoH3Coalesced, "0rtt", "remembered", coalesced))
	}
	f := claim(t, with(302.9), free)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "1 of 1 (page, profile): wiki/fiber +1.0%", f.Here)
	require.Equal(t, experiment.Differs, claim(t, with(304), free).Verdict)
	ss := with(300)
	ss = slices.Delete(ss, 7, 10) // the coalesced cell keeps two loads
	f = claim(t, ss, free)
	require.Equal(t, experiment.Inconclusive, f.Verdict)
	require.Contains(t, f.Reason, "too few samples (n=2")
}

// TestOneHandshakeFromTheProofs: the claim reads the server's records
// (the proofs), not the mode: one coalesced load that took two QUIC
// handshakes, or a TCP one, makes it differ; loads that failed do not
// count.
func TestOneHandshakeFromTheProofs(t *testing.T) {
	const one = "A coalesced single-origin page costs exactly one"
	ss := slices.Concat(loads("fiber", DoH3Coalesced, "0rtt", "remembered", 300), loads("fiber", DNSStream, "1rtt", "", 320))
	f := claim(t, ss, one)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "100% of the coalesced loads (the server's connection records)", f.Here)

	failed := &Sample{Task: Task{Profile: "fiber", Page: "wiki", DNS: DNSStream, H3: "1rtt", Rep: 9}, Status: "timeout"}
	require.Equal(t, experiment.Holds, claim(t, append(slices.Clone(ss), failed), one).Verdict, "a failed load proves nothing")

	ss[0].Proof.QUICHandshakes = 2
	require.Equal(t, experiment.Differs, claim(t, ss, one).Verdict)
	ss[0].Proof.QUICHandshakes, ss[6].Proof.TCPHandshakes = 1, 1
	require.Equal(t, experiment.Differs, claim(t, ss, one).Verdict, "a TCP handshake beside the QUIC one")
}

// TestSettingsWaitInRTTs: the extra PLT of 0-RTT loads that wait for
// SETTINGS is read in the profile's RTTs: one RTT holds, none differs,
// and a wait Mann-Whitney cannot tell from its twin earns no verdict.
func TestSettingsWaitInRTTs(t *testing.T) {
	const wait = "Waiting for the server's SETTINGS costs 0-RTT a round trip"
	for _, profile := range []string{"fiber", "4g"} {
		rtt := rttMs(profile)
		with := func(extra float64) Samples {
			return slices.Concat(loads(profile, DNSStream, "0rtt", "remembered", 300), loads(profile, DNSStream, "0rtt", "wait", 300+extra))
		}
		f := claim(t, with(rtt), wait)
		require.Equal(t, experiment.Holds, f.Verdict, "%s: %s", profile, f.Here)
		require.Equal(t, "median +1.00 RTT (dnsstream wiki/"+profile+" +1.00)", f.Here)
		require.True(t, f.InRTTs)
		f = claim(t, with(2.2*rtt), wait)
		require.Equal(t, experiment.Differs, f.Verdict, "%s: %s", profile, f.Here)
	}
	// Waiting 1 ms on a 14.8 ms round trip: within 0.5-1.5 RTT it is
	// not, and the two cells overlap, so Mann-Whitney cannot tell them.
	f := claim(t, slices.Concat(loads("fiber", DNSStream, "0rtt", "remembered", 300), loads("fiber", DNSStream, "0rtt", "wait", 301)), wait)
	require.Equal(t, experiment.Inconclusive, f.Verdict)
	require.Contains(t, f.Reason, "not significant")
	f = claim(t, loads("fiber", DNSStream, "0rtt", "remembered", 300), wait)
	require.Equal(t, experiment.NoData, f.Verdict)
	require.Equal(t, "no 0-RTT loads that waited for SETTINGS beside ones that did not", f.Here)
}

// TestCellsAgainstBothBaselines: a cell's PLT change is read against
// DoUDP + H3 1-RTT and DoUDP + H3 0-RTT of the same profile, page and
// setup, never another setup's; the shares are of the ok loads.
func TestCellsAgainstBothBaselines(t *testing.T) {
	ss := slices.Concat(loads("fiber", "udp", "1rtt", "", 400), loads("fiber", "udp", "0rtt", "remembered", 320),
		loads("fiber", DoH3Coalesced, "0rtt", "remembered", 336))
	other := loads("fiber", "udp", "1rtt", "", 100)
	for _, s := range other {
		s.Setup = "cdn+origins"
	}
	ss = append(ss, other...)
	ss[10].Status, ss[10].Proof.DNSOnPageConn = "error", true
	for _, s := range ss[11:15] {
		s.Proof.DNSOnPageConn, s.Proof.DNSEarly = true, true
	}
	cells := Summarize(ss)
	i := slices.IndexFunc(cells, func(c Cell) bool { return c.DNS == DoH3Coalesced })
	c := cells[i]
	require.Equal(t, 5, c.N)
	require.Equal(t, 4, c.OK)
	require.InDelta(t, 336.5, c.PLT, 1e-9, "the median of the four ok loads")
	require.InDelta(t, 100*(336.5/400-1), c.RelPLT, 1e-9)
	require.InDelta(t, 100*(336.5/320-1), c.Rel0RTT, 1e-9)
	require.Equal(t, 1.0, c.OnPageConn, "of the ok loads")
	require.Equal(t, "0rtt", c.Variant())
	require.Equal(t, "", cells[0].Setup, "the papers' setup first")
	require.Equal(t, "cdn+origins", cells[len(cells)-1].Setup)
	require.Equal(t, 0.0, cells[len(cells)-1].RelPLT, "its own baseline")
}

// TestOriginFinding: on one CDN with ORIGIN frames, a many-origin page
// holds with one lookup and one handshake besides its DNS transport's own
// connection (none for DoUDP); the same page on separate servers is
// shown beside it, and one-origin pages or the papers' setup alone give
// no data.
func TestOriginFinding(t *testing.T) {
	cell := func(setup, dns string, lookups, spared, hs float64) Cell {
		return Cell{Profile: "fiber", Page: "o20", DNS: dns, H3: "1rtt", Setup: setup, N: 5, OK: 5, Lookups: lookups, Spared: spared, Handshakes: hs}
	}
	f := originFinding([]Cell{cell("cdn+origins", "udp", 1, 19, 1), cell("cdn+origins", "doq", 1, 19, 2), cell("", "udp", 20, 0, 20)})
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "o20: 1 lookups, 1-2 handshakes (separate servers: 20 and 20)", f.Here)
	require.Equal(t, 5, f.N)

	f = originFinding([]Cell{cell("cdn+origins", "udp", 1, 19, 1), cell("cdn+origins", "doq", 1, 19, 3)})
	require.Equal(t, experiment.Differs, f.Verdict, "DoQ's own connection and one more")
	require.Equal(t, experiment.Differs, originFinding([]Cell{cell("cdn+origins", "udp", 4, 16, 1)}).Verdict, "lookups the frames did not spare")
	require.Equal(t, experiment.NoData, originFinding([]Cell{cell("cdn", "udp", 20, 0, 1), cell("", "udp", 20, 0, 20)}).Verdict, "no frames")
	require.Equal(t, experiment.NoData, originFinding([]Cell{cell("cdn+origins", "udp", 1, 0, 1)}).Verdict, "a one-origin page")
}

// TestCellsOfTheDesign: a 1-RTT load has one SETTINGS variant, a 0-RTT
// one a cell per setting; tasks done are left out, a cell with none left
// goes, and the count of loads a profile measures agrees.
func TestCellsOfTheDesign(t *testing.T) {
	c := &Coalescing{Pages: []string{"wiki"}, DNS: []string{"udp", DNSStream}, H3: []string{"1rtt", "0rtt"}, Settings: []string{"remembered", "wait"}, Repeat: 3}
	cells := c.cells("fiber", nil)
	require.Len(t, cells, 2*3, "(1rtt, 0rtt remembered, 0rtt wait) per DNS mode")
	n := 0
	for _, cell := range cells {
		require.Len(t, cell, 3)
		n += len(cell)
		if cell[0].H3 == "1rtt" {
			require.Equal(t, "remembered", cell[0].Settings)
		}
	}
	require.Equal(t, c.loadsPerProfile(), n)
	done := map[string]bool{}
	for _, task := range cells[0] {
		done[task.Key()] = true
	}
	done[cells[1][2].Key()] = true
	left := c.cells("fiber", done)
	require.Len(t, left, 5)
	require.Len(t, left[0], 2)
	require.Equal(t, 1, left[0][1].Rep)
}

// TestDefaultsRefuseWhatCannotRun: unknown modes, variants and
// placements are refused with what is allowed; the setup names what the
// flags change about every load.
func TestDefaultsRefuseWhatCannotRun(t *testing.T) {
	require.ErrorContains(t, (&Coalescing{DNS: []string{"carrier-pigeon"}}).defaults(), `DNS mode "carrier-pigeon"`)
	require.ErrorContains(t, (&Coalescing{H3: []string{"2rtt"}}).defaults(), "2rtt")
	require.ErrorContains(t, (&Coalescing{Settings: []string{"forgotten"}}).defaults(), "forgotten")
	require.ErrorContains(t, (&Coalescing{Placement: "moon"}).defaults(), `placement "moon": want separate or cdn`)
	c := &Coalescing{}
	require.NoError(t, c.defaults())
	require.Equal(t, "", c.setup(), "the papers' setup")
	require.Equal(t, 10, c.Repeat)
	c = &Coalescing{Placement: "cdn", Origins: true, HTTPSRecords: true}
	require.NoError(t, c.defaults())
	require.Equal(t, "cdn+origins+https", c.setup())
}

// TestLoadsDrawnAsTheWebExperiments: the figures read the loads as the
// web experiment's cells, the DNS mode as the transport and the SETTINGS
// treatment in the H3 variant, doxlab's loader under its setup, the
// proof's 0-RTT and resumption as the page's connection's.
func TestLoadsDrawnAsTheWebExperiments(t *testing.T) {
	ss := slices.Concat(loads("fiber", DNSStream, "0rtt", "wait", 40), loads("fiber", "udp", "1rtt", "remembered", 60))
	for _, s := range ss[:5] {
		s.Setup, s.Proof.PageUsed0RTT = "cdn", true
	}
	ss[9].Status = "error"
	cells := webCells(ss)
	require.Len(t, cells, 2)
	var got []string
	for _, c := range cells {
		got = append(got, strings.Join([]string{c.Profile, c.Page, c.Transport, c.H3, c.DNSMode, c.Engine, c.StubState}, " "))
	}
	require.ElementsMatch(t, []string{"fiber wiki dnsstream 0rtt-wait loader cdn doxlab cold", "fiber wiki udp 1rtt loader doxlab cold"}, got)
	for _, c := range cells {
		if c.Transport == DNSStream {
			require.Equal(t, []int{5, 5}, []int{c.N, c.OK})
			require.Equal(t, 1.0, c.Real0RTT, "the proof's 0-RTT")
			require.Equal(t, 40.0, c.PLT)
		} else {
			require.Equal(t, []int{5, 4}, []int{c.N, c.OK})
		}
	}
}

// TestMobileAccessIsTheCellularProfiles: the paper's mobile share is of
// 3G, 4G and 5G accesses, not of fixed lines.
func TestMobileAccessIsTheCellularProfiles(t *testing.T) {
	for p, want := range map[string]bool{"4g-median": true, "3g": true, "5g": true, "fiber": false, "cable": false, "dsl": false} {
		require.Equal(t, want, mobile(p), p)
	}
	require.Equal(t, "fiber|wiki|dnsstream|0rtt|wait|3", Task{Profile: "fiber", Page: "wiki", DNS: DNSStream, H3: "0rtt", Settings: "wait", Rep: 3}.Key())
	require.True(t, Coalesced(DoH3Coalesced))
	require.False(t, Coalesced("doq-emulated"))
}

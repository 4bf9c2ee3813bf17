package amplification

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
)

// qlog is a client qlog in quic-go's JSON-SEQ: each line an event at
// its time (ms), sent or received, of a packet type and length.
func qlog(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var at float64
		var dir, typ string
		var n int
		fmt.Sscanf(e, "%g %s %s %d", &at, &dir, &typ, &n)
		name := map[string]string{"out": "transport:packet_sent", "in": "transport:packet_received"}[dir]
		// A server's Initial or Handshake packet carries a CRYPTO frame
		// but for one typed "-ack", which carries an ACK alone.
		frame := "crypto"
		if ack, ok := strings.CutSuffix(typ, "-ack"); ok {
			typ, frame = ack, "ack"
		}
		fmt.Fprintf(&b, "\x1e{\"time\":%g,\"name\":%q,\"data\":{\"header\":{\"packet_type\":%q},\"raw\":{\"length\":%d},\"frames\":[{\"frame_type\":%q}]}}\n", at, name, typ, n, frame)
	}
	return b.String()
}

// TestQlogFlights reads the client's first flight and the server's
// handshake flight from a qlog: octets sent before anything came, the
// server's Initial and Handshake octets, the longest pause within them
// and the octets before it; a pause past 3/4 of the RTT once the server
// has sent up to its limit is a stall.
func TestQlogFlights(t *testing.T) {
	// A server at its 3× limit: 7,200 of the 7,512 octets it may send,
	// a pause of one RTT (40 ms) while it waits for the client's ACK,
	// then the rest.
	atLimit := []string{"0 out initial 1252", "0.1 out initial 1252",
		"40 in initial 1200", "40.2 in handshake 1200", "40.3 in handshake 1200",
		"40.4 in handshake 1200", "40.5 in handshake 1200", "40.6 in handshake 1200",
		"40.7 out handshake 60",
		"80.6 in handshake 1200", "80.7 in handshake 900",
		"81 in 1RTT 300",
	}
	s := &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog(atLimit...)), s)
	require.Equal(t, 2504, s.ClientFirstFlight)
	require.Equal(t, 2, s.ClientFirstDgrams)
	require.Equal(t, 9300, s.ServerFlight, "Initial and Handshake packets only")
	require.Equal(t, 7200, s.ServerFirstBurst, "what came before the pause")
	require.InDelta(t, 40, s.LongestPauseMs, 1e-3)
	require.True(t, s.Stalled)
	require.InDelta(t, 39.9, s.ServerWaitMs, 1e-9, "from the end of the client's flight")

	// A busy machine's pause of over an RTT after the ServerHello, far
	// from the limit, is no stall, however long; beside a stall at the
	// limit, the stall is the pause kept.
	hiccup := []string{"0 out initial 1252", "0.1 out initial 1252",
		"40 in initial 1200", "100 in handshake 1200", "100.1 in handshake 1200",
		"100.2 in handshake 1200", "100.3 in handshake 1200", "100.4 in handshake 1200"}
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog(hiccup...)), s)
	require.Equal(t, 1200, s.ServerFirstBurst)
	require.InDelta(t, 60, s.LongestPauseMs, 1e-3)
	require.False(t, s.Stalled, "a pause at 1,200 of 7,512 octets")
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog(append(hiccup, "140.4 in handshake 1200")...)), s)
	require.Equal(t, 7200, s.ServerFirstBurst)
	require.InDelta(t, 40, s.LongestPauseMs, 1e-3, "the stall, not the longer pause")
	require.True(t, s.Stalled)

	// The whole flight in one burst: no stall, the burst is the flight;
	// a scheduling hiccup of half an RTT is not one either.
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog("0 out initial 1252", "40 in initial 1200", "40.2 in handshake 1200", "60.2 in handshake 800")), s)
	require.Equal(t, 3200, s.ServerFlight)
	require.InDelta(t, 20.0, s.LongestPauseMs, 1e-9)
	require.Equal(t, 2400, s.ServerFirstBurst)
	require.False(t, s.Stalled, "half an RTT")
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog("0 out initial 1252", "40 in initial 1200", "40 in handshake 1200")), s)
	require.Equal(t, 2400, s.ServerFirstBurst, "no pause: the burst is the flight")
	require.Zero(t, s.LongestPauseMs)

	// A ClientHello in two Initials (a pq key share): the server ACKs the
	// first at once, then signs. The ACK counts against its limit, but
	// the wait after it is the signature's, no pause in the flight, and
	// the server's wait runs to its ServerHello (the ACK was once taken
	// for both: a first burst of 41 octets, a wait of one RTT).
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog("0 out initial 1252", "0.1 out initial 1252", "40 in initial-ack 41",
		"55 in initial 1200", "55 in handshake 1200", "55 in handshake 800")), s)
	require.Equal(t, 3241, s.ServerFlight)
	require.Equal(t, 3241, s.ServerFirstBurst, "the flight in one burst")
	require.Zero(t, s.LongestPauseMs)
	require.InDelta(t, 54.9, s.ServerWaitMs, 1e-9, "to the ServerHello")
	require.False(t, s.Stalled)

	// A Retry restarts the count: the client's first flight is the one
	// sent with the token; the Retry's own wait is no pause in the flight.
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog("0 out initial 1252", "40 in retry 120", "40.1 out initial 1300", "80 in initial 1200", "80.1 in handshake 1000")), s)
	require.Equal(t, 1300, s.ClientFirstFlight)
	require.Equal(t, 1, s.ClientFirstDgrams)
	require.Equal(t, 2200, s.ServerFlight)
	require.False(t, s.Stalled)
	require.InDelta(t, 39.9, s.ServerWaitMs, 1e-9, "from the flight sent with the token")

	// The probe timer fired before the server answered (a busy machine):
	// the client's flight sent again is no part of its first flight,
	// after a Retry too; a timer reset to 0 is no probe.
	pto := func(n int) string {
		return fmt.Sprintf("\x1e{\"time\":1,\"name\":\"recovery:metrics_updated\",\"data\":{\"pto_count\":%d}}\n", n)
	}
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog("0 out initial 1252", "0.1 out initial 1252")+pto(0)+pto(1)+
		qlog("300 out initial 1252", "300.1 out initial 1252", "340 in initial 1200")), s)
	require.Equal(t, []int{2504, 2}, []int{s.ClientFirstFlight, s.ClientFirstDgrams})
	require.InDelta(t, 339.9, s.ServerWaitMs, 1e-9, "a slow server's wait holds the probes")
	s = &Sample{RTTMs: 40}
	analyzeQlog(strings.NewReader(qlog("0 out initial 1252", "40 in retry 120", "40.1 out initial 1300", "40.2 out initial 1300")+pto(1)+
		qlog("400 out initial 1300", "440 in initial 1200")), s)
	require.Equal(t, []int{2600, 2}, []int{s.ClientFirstFlight, s.ClientFirstDgrams})

	// Lines that are not events are skipped; a loopback run (no RTT)
	// never stalls.
	s = &Sample{}
	analyzeQlog(strings.NewReader("\x1e{\"qlog_version\":\"0.3\"}\nnot json\n"+qlog("0 out initial 1252", "1 in initial 1200", "50 in handshake 1000")), s)
	require.Equal(t, 1252, s.ClientFirstFlight)
	require.False(t, s.Stalled)
}

// handshakes are five ok handshakes of one cell on a 40 ms link, their
// handshake ±0.02 RTT around rtts.
func handshakes(profile, cert, validation string, rtts float64, stalled bool) Samples {
	var ss Samples
	for i := range 5 {
		ss = append(ss, &Sample{Profile: profile, Cert: cert, KeyShare: "classic", Validation: validation, Rep: i, RTTMs: 40, Status: "ok",
			HandshakeRTTs: rtts + 0.02*float64(i-2), Stalled: stalled, Retry: validation == "retry", TokenUsed: validation == "token"})
	}
	return ss
}

// TestAmplificationFinding holds when the large chain without
// validation adds 0.5-1.5 RTT and stalls in most handshakes, and Retry or
// a token lift the stall; post-quantum key shares are not the claim's.
func TestAmplificationFinding(t *testing.T) {
	verdict := func(ss ...Samples) experiment.Finding {
		fs := experiment.Earn(slices.Concat(ss...).Findings(), experiment.Evidence{})
		require.Len(t, fs, 1)
		return fs[0]
	}
	small := handshakes("delay-40ms", "small", "none", 1.1, false)
	f := verdict(small, handshakes("delay-40ms", "large", "none", 2.1, true), handshakes("delay-40ms", "large", "retry", 2.1, false))
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "X25519 ClientHello, no validation: large chain 2.10 RTT, small 1.10 RTT; 100 % of large-chain handshakes stalled", f.Here)

	require.Equal(t, experiment.Differs, verdict(small, handshakes("delay-40ms", "large", "none", 2.1, false)).Verdict,
		"an extra RTT with no stall is not the limit's")
	require.Equal(t, experiment.Differs, verdict(small, handshakes("delay-40ms", "large", "none", 2.1, true), handshakes("delay-40ms", "large", "token", 2.1, true)).Verdict,
		"a token that does not lift the stall")
	require.Equal(t, experiment.Differs, verdict(small, handshakes("delay-40ms", "large", "none", 3.2, true)).Verdict, "two RTTs more")

	pq := handshakes("delay-40ms", "large", "none", 2.1, true)
	for _, s := range pq {
		s.KeyShare = "pq"
	}
	require.Equal(t, experiment.NoData, verdict(small, pq).Verdict)

	f = verdict(handshakes("none", "small", "none", 1.1, false), handshakes("none", "large", "none", 2.1, true))
	require.Equal(t, experiment.Inconclusive, f.Verdict)
	require.Contains(t, f.Reason, "measured on loopback")
}

// TestCellsShareOfOK: a cell's shares are of its ok handshakes, its
// medians of theirs, and cells come in the experiment's order.
func TestCellsShareOfOK(t *testing.T) {
	ss := slices.Concat(handshakes("p", "large", "retry", 1.1, false), handshakes("p", "small", "none", 1.0, false))
	ss[0].Status, ss[0].Retry = "timeout", false
	ss[1].Stalled = true
	cells := Summarize(ss)
	require.Len(t, cells, 2)
	require.Equal(t, "small", cells[0].Cert, "small before large")
	c := cells[1]
	require.Equal(t, 5, c.N)
	require.Equal(t, 4, c.OK)
	require.Equal(t, 1.0, c.Retried)
	require.Equal(t, 0.25, c.Stalled)
	require.InDelta(t, 1.11, c.HandshakeRTTs, 1e-9, "the median of the four ok")
}

// TestCellsSayTheServersWait: a cell's server wait is the median of its
// ok handshakes' (one RTT and the signature), in the table, the report's
// cells and the export; a run from before the wait was kept says none
// rather than a wait of 0.
func TestCellsSayTheServersWait(t *testing.T) {
	ss := slices.Concat(handshakes("p", "large", "token", 1.3, false), handshakes("p", "small", "token", 1.1, false))
	for i, s := range ss[:5] {
		s.ServerWaitMs = 46 + float64(i) // the RSA-4096 signature: 6-10 ms past the 40 ms RTT
	}
	ss[0].Status, ss[0].ServerWaitMs = "timeout", 500
	cells := Summarize(ss)
	require.Equal(t, "large", cells[1].Cert)
	require.Equal(t, 4, cells[1].ServerWaitStat.N, "of the ok handshakes")
	require.InDelta(t, 48.5, cells[1].ServerWaitStat.Median, 1e-9)
	require.Zero(t, cells[0].ServerWaitStat.N, "no wait kept: none, not 0 ms")

	metrics := map[string][]string{}
	for _, c := range ss.Cells() {
		metrics[c.Keys["cert"]] = append(metrics[c.Keys["cert"]], c.Metric)
	}
	require.Contains(t, metrics["large"], "server_wait_ms")
	require.NotContains(t, metrics["small"], "server_wait_ms")
	var b strings.Builder
	require.NoError(t, ss.WriteTable(&b))
	require.Contains(t, b.String(), "server wait ms")
	require.Contains(t, b.String(), "48.5 [")
}

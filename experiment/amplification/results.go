package amplification

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/store"
)

// Samples are the stored handshakes of amplification runs.
type Samples []*Sample

// Load reads the handshakes of the runs whose IDs start with prefix.
func (c *Amplification) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	ss, err := experiment.LoadResults[Sample](ctx, st, Kind, experiment.OfExperiment(prefix))
	return Samples(ss), err
}

// Count is the number of handshakes.
func (ss Samples) Count() (int, string) { return len(ss), "handshakes" }

// WriteTable writes the medians per cell.
func (ss Samples) WriteTable(w io.Writer) error {
	fmt.Fprintln(w, "DoQ handshakes, medians (the handshake's with its 95 % interval); a stall is a pause over three quarters of an RTT once the server has sent up to its limit, three times the client's first flight; the server's wait is from the client's first flight to the server's ServerHello, one RTT and the server's time to sign (client qlog)")
	fmt.Fprintf(w, "%-6s %7s %-8s %-6s %7s %14s %-14s %-21s %-19s %-19s %-19s %8s %6s %6s\n", "cert", "octets", "share", "valid.", "ok", "handshake RTTs", "95% CI", "total ms", "client 1st B", "server 1st B", "server wait ms", "stalled", "retry", "token")
	for _, x := range Summarize(ss) {
		if _, err := fmt.Fprintf(w, "%-6s %7d %-8s %-6s %7s %14s %-14s %-21s %-19s %-19s %-19s %7.0f%% %5.0f%% %5.0f%%\n", x.Cert, x.CertOctets, x.KeyShare, x.Validation, fmt.Sprintf("%d/%d", x.OK, x.N),
			stats.F(x.HandshakeRTTs, 2), x.HandshakeStat.CI(2), x.TotalStat.Cell(1), x.ClientFirstStat.Cell(0), x.ServerFirstStat.Cell(0), x.ServerWaitStat.Cell(1), 100*x.Stalled, 100*x.Retried, 100*x.Token); err != nil {
			return err
		}
	}
	return nil
}

var table = experiment.Table("amplification", `<table id="amp"><tr><th class="l">cert</th><th>octets</th><th class="l">key share</th><th class="l">validation</th><th>ok/n</th><th>handshake RTTs</th><th>95 % CI</th><th>total ms</th><th>client first flight</th><th>server first burst</th><th>server wait ms</th><th>stalled</th><th>Retry</th><th>token</th></tr>
{{range .}}<tr><td class="l">{{.Cert}}</td><td>{{.CertOctets}}</td><td class="l">{{.KeyShare}}</td><td class="l">{{.Validation}}</td><td>{{.OK}}/{{.N}}</td><td>{{f .HandshakeRTTs}}</td><td>{{ci .HandshakeStat}}</td><td>{{mci1 .TotalStat}}</td><td>{{mci0 .ClientFirstStat}}</td><td>{{mci0 .ServerFirstStat}}</td><td>{{mci1 .ServerWaitStat}}</td><td>{{share .Stalled}}</td><td>{{share .Retried}}</td><td>{{share .Token}}</td></tr>
{{end}}</table>`)

// Section is the report's part: the table, and the median handshake in
// RTTs per certificate × key share × validation, stalled cells in red.
func (ss Samples) Section(dir string) (*experiment.Section, error) {
	cells := Summarize(ss)
	var bars []figure.Bar
	data := figure.Data{Header: []string{"cert", "key share", "validation", "median handshake (RTTs)", "stalled share"}}
	for _, c := range cells {
		data.Add(c.Cert, c.KeyShare, c.Validation, c.HandshakeRTTs, c.Stalled)
		b := figure.Bar{Label: fmt.Sprintf("%s, %s, %s", c.Cert, c.KeyShare, c.Validation), Value: c.HandshakeRTTs, Color: figure.Blue, Text: stats.F(c.HandshakeRTTs, 2)}
		if c.Stalled > 0.5 {
			b.Color = figure.Red
		}
		bars = append(bars, b)
	}
	p, w, h, _, err := figure.Bars(bars, "DoQ handshake per certificate, key share and address validation", "median handshake (multiples of the RTT)")
	if err != nil {
		return nil, err
	}
	set := &figure.Set{Dir: dir}
	if err := set.Add(p, "amp-handshake", "amplification limit: handshake in RTTs (red: the server stalled for an ACK)", "", w, h, data); err != nil {
		return nil, err
	}
	return experiment.NewSection("amplification", "QUIC's amplification limit",
		"DoQ handshakes on new connections. Before it has validated the client's address a server may send three times what it received (RFC 9000 §8.1); a larger certificate chain makes it stall for the client's ACK. Client first flight and server first burst are octets from the client's qlog; stalled is the share of handshakes with a pause over three quarters of an RTT once the server had sent up to that limit. The server's wait is the client's, from its first flight to the server's ServerHello: one RTT and the server's time to answer, where it signs the chain.",
		table, cells, set)
}

// Findings checks the PAM 2022 paper's §4 claim: a DoQ server that has not
// validated the client's address stalls at QUIC's amplification limit
// when its certificate chain is large, costing an extra round trip that
// Retry or a NEW_TOKEN token avoid.
func (ss Samples) Findings() []experiment.Finding {
	var large, small, validated []float64
	stalled, n := 0.0, 0
	for _, c := range Summarize(ss) {
		if c.OK == 0 || c.KeyShare != "classic" {
			continue
		}
		switch {
		case c.Cert == "large" && c.Validation == "none":
			large = append(large, c.HandshakeRTTs)
			stalled += c.Stalled
			n++
		case c.Cert == "small" && c.Validation == "none":
			small = append(small, c.HandshakeRTTs)
		case c.Cert == "large":
			validated = append(validated, c.Stalled)
		}
	}
	// Each handshake of the two cells, to test the difference.
	var largeHS, smallHS []float64
	loopback := true
	for _, x := range ss {
		if x.Profile != "" && x.Profile != "none" {
			loopback = false
		}
		if x.Status != "ok" || x.KeyShare != "classic" || x.Validation != "none" {
			continue
		}
		switch x.Cert {
		case "large":
			largeHS = append(largeHS, x.HandshakeRTTs)
		case "small":
			smallHS = append(smallHS, x.HandshakeRTTs)
		}
	}
	apart := stats.Compare(smallHS, largeHS)
	l, s := stats.Median(large), stats.Median(small)
	share := math.NaN()
	if n > 0 {
		share = stalled / float64(n)
	}
	v := experiment.Both(experiment.Within(l-s, 0.5, 1.5), experiment.Within(share, 0.5, 1))
	if len(validated) > 0 && v == experiment.Holds && stats.Median(validated) > 0.5 {
		v = experiment.Differs // Retry or a token should have lifted the limit
	}
	return []experiment.Finding{{
		Claim:   "A large certificate chain costs DoQ an extra round trip at the amplification limit",
		Source:  "PAM 2022 paper §4, Fig. 3",
		Paper:   "about 40 % of DoQ handshakes took 2 RTTs or more instead of 1, traced to address validation and the 3× limit",
		Here:    fmt.Sprintf("X25519 ClientHello, no validation: large chain %s RTT, small %s RTT; %s of large-chain handshakes stalled", experiment.F2(l), experiment.F2(s), experiment.Share(share)),
		Why:     "holds when the large chain adds 0.5-1.5 RTT and stalls in most handshakes, and Retry or a token remove the stall",
		Figure:  "amplification",
		Verdict: v,
		N:       min(len(largeHS), len(smallHS)),
		InRTTs:  true, OnLoopback: loopback,
		Test: &apart,
	}}
}

// Cells are the table's medians as numbers.
func (ss Samples) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, x := range Summarize(ss) {
		keys := map[string]string{"cert": x.Cert, "key_share": x.KeyShare, "validation": x.Validation}
		out = append(out,
			experiment.NewCell("amplification", keys, "handshake_rtts", x.N, x.HandshakeStat),
			experiment.NewCell("amplification", keys, "total_ms", x.N, x.TotalStat),
			experiment.NewCell("amplification", keys, "client_first_flight_octets", x.N, x.ClientFirstStat),
			experiment.NewCell("amplification", keys, "server_first_burst_octets", x.N, x.ServerFirstStat))
		if x.ServerWaitStat.N > 0 { // none in runs from before it was kept
			out = append(out, experiment.NewCell("amplification", keys, "server_wait_ms", x.ServerWaitStat.N, x.ServerWaitStat))
		}
	}
	return out
}

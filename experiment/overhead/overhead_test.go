package overhead

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	layers "github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/store"
)

func conn(transport, mode string, queries int, ip, dns, handshake int64, pkts int) *Conn {
	var up, down layers.Counts
	up[layers.IP], up[layers.DNS] = ip, dns
	down[layers.IP], down[layers.DNS], down[layers.TLSHandshake] = ip, dns, handshake
	return &Conn{Cert: "small", Transport: transport, Mode: mode, Queries: queries, Decrypted: true, Up: up, Down: down,
		UpPkts: pkts, DownPkts: pkts, HandshakeUp: 10, HandshakeDown: handshake, Query: dns, Response: dns}
}

// TestSummarizePerResolution: a persistent connection's octets are
// shared by its resolutions; a new connection's single-query split is
// the median over its connections; cells come in the one order.
func TestSummarizePerResolution(t *testing.T) {
	cs := Conns{
		conn("doq", "new", 1, 100, 50, 1000, 5),
		conn("doq", "new", 1, 100, 50, 3000, 7),
		conn("doq", "new", 1, 100, 50, 2000, 6),
		conn("udp", "persistent", 10, 280, 500, 0, 10),
	}
	cells := Summarize(cs)
	require.Len(t, cells, 2)
	udp, doq := cells[1], cells[0]
	require.Equal(t, "new", doq.Mode, "new connections before persistent ones")
	require.Equal(t, "udp", udp.Transport)
	require.Equal(t, 10, udp.Resolutions)
	require.InDelta(t, (2*280+2*500)/10.0, udp.Octets, 1e-9, "one connection's octets over its ten resolutions")
	require.InDelta(t, 2.0, udp.Packets, 1e-9)
	require.InDelta(t, 100.0, udp.Layers[layers.DNS], 1e-9)
	require.Zero(t, udp.Total, "the single-query split is for new connections")
	require.Equal(t, 3, doq.Conns)
	require.InDelta(t, 2000.0, doq.HandshakeDown, 1e-9, "the median of 1000, 3000 and 2000")
	require.InDelta(t, float64(2*50+2000), doq.Total, 1e-9, "IP payload octets (IP headers out), the median connection's")
	require.InDelta(t, 12.0, doq.Packets, 1e-9)

	var b strings.Builder
	require.NoError(t, cs.WriteTable(&b))
	require.Contains(t, b.String(), "small  persistent udp      10      156    2.0")
	sec, err := cs.Section(t.TempDir())
	require.NoError(t, err)
	require.NotEmpty(t, sec.Figures, "octets by layer and packets per resolution")
	n, unit := cs.Count()
	require.Equal(t, 4, n)
	require.Equal(t, "captured connections", unit)
}

// TestSplitTheSlidesWay: a captured connection's IP payload splits into
// the handshake each way (before the first query, before the first
// answer), the queries and the answers; packets after the answer that
// carry no DNS (a close, an ACK) count in neither handshake. A query
// resent (a tail-loss probe) costs its octets again but is no second
// query.
func TestSplitTheSlidesWay(t *testing.T) {
	pkt := func(fromClient bool, ipHeader, dns, other int64) *layers.Packet {
		var c layers.Counts
		c[layers.IP], c[layers.DNS], c[layers.TLSHandshake] = ipHeader, dns, other
		return &layers.Packet{FromClient: fromClient, Len: int(ipHeader + dns + other), Layers: c, FreshDNS: dns}
	}
	resent := pkt(true, 40, 60, 20)
	resent.FreshDNS = 0
	cn := &layers.Conn{Decrypted: true, Packets: []*layers.Packet{
		pkt(true, 40, 0, 300),   // ClientHello
		pkt(false, 40, 0, 3000), // ServerHello … Finished
		pkt(true, 40, 0, 80),    // client Finished
		pkt(true, 40, 60, 20),   // the query
		resent,                  // and again
		pkt(false, 40, 0, 200),  // a ticket, before the answer
		pkt(false, 40, 90, 20),  // the answer
		pkt(true, 40, 0, 30),    // close_notify
		pkt(false, 40, 0, 30),
	}}
	c := summarizeConn(cn)
	require.True(t, c.Decrypted)
	require.Equal(t, 1, c.Queries)
	require.Equal(t, int64(380), c.HandshakeUp)
	require.Equal(t, int64(3200), c.HandshakeDown, "the ticket came before the answer")
	require.Equal(t, int64(160), c.Query, "the query's octets twice on the wire")
	require.Equal(t, int64(110), c.Response)
	require.Equal(t, 5, c.UpPkts)
	require.Equal(t, 4, c.DownPkts)
	require.Equal(t, int64(5*40), c.Up[layers.IP])
}

// TestOverheadFinding holds when DoH/2 on a new connection costs over
// ten times DoUDP's octets a resolution and a persistent connection
// under a third of a new one's; large certificates are not the claim's.
func TestOverheadFinding(t *testing.T) {
	finding := func(cs ...*Conn) experiment.Finding {
		fs := Conns(cs).Findings()
		require.Len(t, fs, 1)
		return fs[0]
	}
	udp := conn("udp", "new", 1, 56, 70, 0, 1)                 // 252 octets
	dohNew := conn("doh2", "new", 1, 400, 100, 2500, 12)       // 3,500
	dohKept := conn("doh2", "persistent", 10, 800, 300, 0, 30) // 220 a resolution
	f := finding(udp, dohNew, dohKept)
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "DoUDP 252; DoH/2 3500 new (13.89 ×), 220 persistent (octets per resolution, small certificate)", f.Here)
	require.Equal(t, 1, f.N, "the fewest resolutions behind a cell")

	require.Equal(t, experiment.Differs, finding(udp, conn("doh2", "new", 1, 400, 100, 400, 12), dohKept).Verdict, "under ten times")
	require.Equal(t, experiment.Differs, finding(udp, dohNew, conn("doh2", "persistent", 1, 400, 100, 2500, 12)).Verdict, "nothing amortised")
	require.Equal(t, experiment.NoData, finding(udp, dohNew).Verdict)

	large := conn("udp", "new", 1, 56, 70, 0, 1)
	large.Cert = "large"
	require.Equal(t, experiment.NoData, finding(large, dohNew, dohKept).Verdict, "DoUDP of the small certificate's run only")
}

// TestConnsLabelledByTheirWindow: a captured connection is stored under
// the certificate, transport and mode of the window it began in, with
// the certificate's size and its index in that window; one that began
// outside every window, has no client port (a stray datagram) or carried
// no resolution (a warm-up probe) is left out and takes no index.
func TestConnsLabelledByTheirWindow(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	run := store.NewRun("experiment:overhead", "", nil)
	run.ID = "overhead-x"
	require.NoError(t, st.BeginRun(ctx, run))
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	windows := []window{{"small", "dot", "new", t0, t0.Add(time.Second)}, {"small", "doq", "persistent", t0.Add(time.Second), t0.Add(2 * time.Second)}}
	client := netip.MustParseAddrPort("10.200.0.1:40000")
	dnsPkt := func(at time.Duration) *layers.Packet {
		var c layers.Counts
		c[layers.IP], c[layers.DNS] = 40, 50
		return &layers.Packet{Time: t0.Add(at), FromClient: true, Len: 90, Layers: c, FreshDNS: 50}
	}
	probe := &layers.Packet{Time: t0.Add(100 * time.Millisecond), FromClient: true, Len: 60, Layers: layers.Counts{layers.IP: 40}}
	conns := []*layers.Conn{
		{Client: client, Packets: []*layers.Packet{dnsPkt(100 * time.Millisecond)}},                                   // dot new 0000
		{Client: client, Packets: []*layers.Packet{probe}},                                                            // no resolution
		{Client: client, Packets: []*layers.Packet{dnsPkt(900 * time.Millisecond)}},                                   // dot new 0001
		{Client: client, Packets: []*layers.Packet{dnsPkt(1500 * time.Millisecond), dnsPkt(1600 * time.Millisecond)}}, // doq persistent 0000
		{Client: client, Packets: []*layers.Packet{dnsPkt(2 * time.Second)}},                                          // after the last window
		{Packets: []*layers.Packet{dnsPkt(200 * time.Millisecond)}},                                                   // no client port
		{Client: client}, // no packets
	}
	c := &Overhead{}
	require.NoError(t, c.storeConns(ctx, st, run.ID, conns, windows, map[string]int{"small": 1200}))
	res, err := c.Load(ctx, st, "overhead-x")
	require.NoError(t, err)
	var got []string
	for _, x := range res.(Conns) {
		got = append(got, fmt.Sprintf("%s %s %s %d #%d %d queries", x.Cert, x.Transport, x.Mode, x.CertOctets, x.Index, x.Queries))
	}
	require.ElementsMatch(t, []string{"small dot new 1200 #0 1 queries", "small dot new 1200 #1 1 queries", "small doq persistent 1200 #0 2 queries"}, got)
}

// TestCellsSayWhatWasNotDecrypted: a cell counts as decrypted only if
// every encrypted connection in it was (its layers above TLS are
// guesses otherwise); UDP and TCP carry DNS in clear and need no key.
func TestCellsSayWhatWasNotDecrypted(t *testing.T) {
	dark := conn("dot", "new", 1, 100, 50, 1000, 5)
	dark.Decrypted = false
	clearUDP := conn("udp", "new", 1, 56, 70, 0, 1)
	clearUDP.Decrypted = false
	cells := Summarize(Conns{conn("dot", "new", 1, 100, 50, 1000, 5), dark, clearUDP, conn("doq", "new", 1, 100, 50, 1000, 5)})
	got := map[string]bool{}
	for _, c := range cells {
		got[c.Transport] = c.Decrypted
	}
	require.Equal(t, map[string]bool{"dot": false, "udp": true, "doq": true}, got)
}

// TestSectionDrawsEachCertificateAndMode: per certificate and connection
// mode a figure of octets by layer and one of packets, each with its
// data beside it, in the cells' order (the small certificate, the
// paper's, first).
func TestSectionDrawsEachCertificateAndMode(t *testing.T) {
	var cs Conns
	for _, cert := range []string{"small", "large"} {
		for _, mode := range []string{"new", "persistent"} {
			for _, tr := range []string{"udp", "doh2"} {
				c := conn(tr, mode, 2, 100, 50, 1000, 5)
				c.Cert = cert
				cs = append(cs, c)
			}
		}
	}
	dir := t.TempDir()
	sec, err := cs.Section(dir)
	require.NoError(t, err)
	var names []string
	for _, f := range sec.Figures {
		names = append(names, f.Name)
		require.FileExists(t, filepath.Join(dir, f.CSV))
	}
	require.Equal(t, []string{"overhead-layers-small-new", "overhead-packets-small-new", "overhead-layers-small-persistent", "overhead-packets-small-persistent",
		"overhead-layers-large-new", "overhead-packets-large-new", "overhead-layers-large-persistent", "overhead-packets-large-persistent"}, names, "the small certificate first")
	require.Len(t, sec.Files, 6*len(names), "SVG, PDF and PNG at two widths each")
	csv, err := os.ReadFile(filepath.Join(dir, "overhead-packets-small-new.csv"))
	require.NoError(t, err)
	require.Equal(t, "transport,packets per resolution\nudp,5\ndoh2,5\n", string(csv), "a resolution's packets: 10 over 2, DoUDP first")
}

package overhead

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	layers "github.com/doxlab/doxlab/overhead"
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
// carry no DNS (a close, an ACK) count in neither handshake.
func TestSplitTheSlidesWay(t *testing.T) {
	pkt := func(fromClient bool, ipHeader, dns, other int64) *layers.Packet {
		var c layers.Counts
		c[layers.IP], c[layers.DNS], c[layers.TLSHandshake] = ipHeader, dns, other
		return &layers.Packet{FromClient: fromClient, Len: int(ipHeader + dns + other), Layers: c}
	}
	cn := &layers.Conn{Decrypted: true, Packets: []*layers.Packet{
		pkt(true, 40, 0, 300),   // ClientHello
		pkt(false, 40, 0, 3000), // ServerHello … Finished
		pkt(true, 40, 0, 80),    // client Finished
		pkt(true, 40, 60, 20),   // the query
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
	require.Equal(t, int64(80), c.Query)
	require.Equal(t, int64(110), c.Response)
	require.Equal(t, 4, c.UpPkts)
	require.Equal(t, 4, c.DownPkts)
	require.Equal(t, int64(4*40), c.Up[layers.IP])
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

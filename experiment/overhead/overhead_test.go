package overhead

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

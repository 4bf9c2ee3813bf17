package overhead

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRequestStreamsAskedInZeroRTT: a stream answered without its request
// seen is kept only on a connection that sent 0-RTT packets, and timed
// from the first of them; a request seen is timed from its own packet.
func TestRequestStreamsAskedInZeroRTT(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	pkt := func(ms int) *Packet { return &Packet{Time: t0.Add(time.Duration(ms) * time.Millisecond)} }
	answer := func(id uint64, ms int) occurrence {
		return occurrence{pkt: pkt(ms), stream: streamKey{dir: 1, id: id}, data: []byte("x")}
	}
	occ := []occurrence{
		answer(0, 20), answer(0, 25), // the document, asked in 0-RTT
		{pkt: pkt(30), stream: streamKey{dir: 0, id: 4}, data: []byte("GET")}, // asked in 1-RTT
		answer(4, 45),
	}
	streams := map[streamKey][]byte{{dir: 1, id: 0}: []byte("xx"), {dir: 1, id: 4}: []byte("x")}

	got := requestStreams(occ, streams, t0.Add(time.Millisecond))
	require.Len(t, got, 2)
	require.Equal(t, Stream{ID: 0, Request: t0.Add(time.Millisecond), Last: t0.Add(25 * time.Millisecond), Octets: 2}, got[0])
	require.Equal(t, Stream{ID: 4, Request: t0.Add(30 * time.Millisecond), Last: t0.Add(45 * time.Millisecond), Octets: 1}, got[1])

	got = requestStreams(occ, streams, time.Time{})
	require.Len(t, got, 1, "no 0-RTT: an answer without its request is not this capture's")
	require.EqualValues(t, 4, got[0].ID)
}

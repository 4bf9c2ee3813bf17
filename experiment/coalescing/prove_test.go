package coalescing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestProveFromTheRecords: a load's proof is read from what the loader
// and the server recorded, each fact from the right record: handshakes
// are this client's connections only (QUIC by ALPN h3 or doq, else TCP);
// the page host's lookup (any case) gives the DNS time, and rode on the
// page's connection only when coalesced onto that very connection; the
// transport and early data are the server's first query for the host
// (any case, with its root dot); 0-RTT, resumption and the token are the
// web listener's HTTP/3 connection from the page socket's port, not
// another connection's; a name an ORIGIN frame answered counts as
// spared, not as a lookup.
func TestProveFromTheRecords(t *testing.T) {
	const host, client = "wiki.example", "10.200.0.1"
	load := &pageload.Result{PLTMs: 210.5,
		Resources: []pageload.Fetch{{Conn: 1}},
		Lookups: []*pageload.Lookup{
			{Host: "cdn.example", Transport: "udp", StartMs: 0, EndMs: 3},
			{Host: "WIKI.example", Transport: "dnsstream", Coalesced: true, Conn: 1, StartMs: 1.25, EndMs: 13.0004},
			{Host: "img.example", Transport: "origin"},
		},
		Conns: []*pageload.Conn{{Local: "0.0.0.0:40001"}, {Local: "0.0.0.0:40002", WaitedSettings: true, SettingsMs: 9.5}},
	}
	recs := []*server.Record{
		{Kind: "conn", Remote: "10.200.0.1:40001", Listener: "web", ALPN: "h3", Used0RTT: false},
		{Kind: "conn", Remote: "10.200.0.1:40002", Listener: "web", ALPN: "h3", Used0RTT: true, Resumed: true, TokenUsed: true},
		{Kind: "conn", Remote: "10.200.0.1:50000", Listener: "dot", ALPN: "dot"},
		{Kind: "conn", Remote: "10.200.0.9:40002", Listener: "web", ALPN: "h3"}, // another client: not this load's
		{Kind: "query", QName: "cdn.example.", Transport: "udp"},
		{Kind: "query", QName: "Wiki.Example.", Transport: "dnsstream", EarlyData: true},
		{Kind: "query", QName: "wiki.example.", Transport: "udp"}, // a later query: the first tells
	}
	s := &Sample{Load: load, Server: recs}
	s.prove(host, client)
	require.Equal(t, Proof{QUICHandshakes: 2, TCPHandshakes: 1, Lookups: 2, Spared: 1, DNSOnPageConn: true, DNSEarly: true, DNSTransport: "dnsstream",
		PageUsed0RTT: true, PageResumed: true, PageTokenUsed: true, WaitedSettings: true, SettingsMs: 9.5}, s.Proof)
	require.Equal(t, 210.5, s.PLTMs)
	require.Equal(t, 11.75, s.DNSMs, "the page host's lookup, to the µs")

	// Coalesced, but onto another connection than the page's: not on it.
	load.Lookups[1].Conn = 0
	s = &Sample{Load: load, Server: recs}
	s.prove(host, client)
	require.False(t, s.Proof.DNSOnPageConn)

	// The emulated DoQ: the lookup measured apart, then the load; the
	// paper sums them, and the lookup's time is the one measured apart.
	s = &Sample{Load: load, Apart: &transport.Record{Timing: transport.Timing{TotalMs: 40}}}
	s.prove(host, client)
	require.Equal(t, []float64{250.5, 40}, []float64{s.PLTMs, s.DNSMs})

	// A load that never happened proves nothing, and keeps the lookup
	// measured apart.
	s = &Sample{Apart: &transport.Record{Timing: transport.Timing{TotalMs: 40}}}
	s.prove(host, client)
	require.Equal(t, Proof{}, s.Proof)
	require.Equal(t, []float64{0, 40}, []float64{s.PLTMs, s.DNSMs})
}

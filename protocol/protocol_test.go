package protocol_test

import (
	"image/color"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/protocol"
)

func TestTable(t *testing.T) {
	require.Equal(t, []string{"udp", "tcp", "dot", "doh2", "doh3", "doq"}, protocol.Default())
	require.Equal(t, []string{"udp", "tcp", "tls", "https", "h3", "quic", "odoh"}, protocol.Schemes())
	o, _ := protocol.Lookup(protocol.ODoH)
	require.Equal(t, "odoh://127.0.0.1:443/dns-query?target=127.0.0.1:443/dns-query", o.URL("127.0.0.1:443", "/dns-query"), "the server relaying to itself")
	p, ok := protocol.ForScheme("https")
	require.True(t, ok)
	require.Equal(t, protocol.DoH2, p.Name, "https means HTTP/2 unless told otherwise")
	q, _ := protocol.Lookup(protocol.DoQ)
	require.True(t, q.Datagram)
	require.Equal(t, 853, q.Port)
	_, ok = protocol.Lookup("doh4")
	require.False(t, ok)
	require.Equal(t, "a, b or c", protocol.OneOf([]string{"a", "b", "c"}))
}

// TestEveryProtocolHasItsOwnLook: a protocol added to the table
// without a colour or a marker, or with another's, fails here before a
// figure draws two transports alike.
func TestEveryProtocolHasItsOwnLook(t *testing.T) {
	seen := map[color.RGBA]string{}
	marked := map[string]string{}
	for _, p := range protocol.All {
		if other, ok := marked[p.Marker]; ok || p.Marker == "" {
			t.Errorf("%s has no marker of its own (%q, as %s)", p.Name, p.Marker, other)
		}
		marked[p.Marker] = p.Name
		if p.Color.A == 0 {
			t.Errorf("%s has no colour", p.Name)
		}
		if other, ok := seen[p.Color]; ok {
			t.Errorf("%s has %s's colour", p.Name, other)
		}
		seen[p.Color] = p.Name
		if p.Label == "" {
			t.Errorf("%s has no label", p.Name)
		}
	}
}

// TestRoundTripsByDesign: what the PAM paper counts on a new connection.
func TestRoundTripsByDesign(t *testing.T) {
	// ODoH's are the client's to its proxy; the proxy's kept connection
	// to the target adds a round trip of that hop.
	want := map[string]int{"udp": 1, "tcp": 2, "dot": 3, "doh1": 3, "doh2": 3, "doh3": 2, "doq": 2, "odoh": 3}
	for _, p := range protocol.All {
		require.Equal(t, want[p.Name], p.RoundTrips(), p.Name)
	}
}

// TestOrdering: every transport and variant is in order, independent or
// neither, from the table's properties alone.
func TestOrdering(t *testing.T) {
	got := map[string]string{}
	for _, name := range protocol.WithVariants() {
		switch {
		case protocol.AnswersInOrder(name) && protocol.Independent(name):
			t.Fatalf("%s is both in order and independent", name)
		case protocol.AnswersInOrder(name):
			got[name] = "in order"
		case protocol.Independent(name):
			got[name] = "independent"
		default:
			got[name] = "neither"
		}
	}
	require.Equal(t, map[string]string{"udp": "independent", "tcp": "neither", "tcp-inorder": "in order", "dot": "neither", "dot-inorder": "in order",
		"doh1": "in order", "doh2": "independent", "doh3": "independent", "doq": "independent"}, got)
	require.True(t, protocol.Independent(protocol.ODoH), "its HTTP/2 streams")
	require.NotContains(t, protocol.Direct(), protocol.ODoH, "relayed through a proxy")
	require.False(t, protocol.AnswersInOrder("nonsense"+protocol.InOrder))
}

// TestLadderRungs: each protocol's lookups hide what its rung says:
// plain DNS nothing, the encrypted ones names from the network, ODoH the
// client from the resolver too.
func TestLadderRungs(t *testing.T) {
	for _, p := range protocol.All {
		want := "names from the network"
		switch p.Name {
		case protocol.UDP, protocol.TCP:
			want = "nothing: names in clear"
		case protocol.ODoH:
			want = "names from the network, the client from the resolver"
		}
		require.Equal(t, want, p.Hides(), p.Name)
	}
}

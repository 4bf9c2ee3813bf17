package privacy

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/server"
)

// TestWebFactsFromTheWebListener: a sample's ECH outcomes are its web
// connections', in order (a stale config rejected, then the retry
// accepted), never the DNS listeners'; the outer name is the accepted
// connection's outer SNI, and without ECH the name sent in clear.
func TestWebFactsFromTheWebListener(t *testing.T) {
	var s Sample
	webFacts(&s, []*server.Record{
		{Kind: "conn", Listener: "doh", ECH: ech.GREASE, SNI: "resolver.test"},
		{Kind: "conn", Listener: "web", ECH: ech.Rejected, OuterSNI: publicName},
		{Kind: "query", Listener: "web"},
		{Kind: "conn", Listener: "web", ECH: ech.Accepted, OuterSNI: publicName, SNI: site},
	})
	require.Equal(t, []string{ech.Rejected, ech.Accepted}, s.ECH)
	require.Equal(t, publicName, s.OuterSNI, "the network saw the public name, not "+site)

	var clear Sample
	webFacts(&clear, []*server.Record{{Kind: "conn", Listener: "web", ECH: ech.GREASE, SNI: site}})
	require.Equal(t, []string{ech.GREASE}, clear.ECH)
	require.Equal(t, site, clear.OuterSNI, "in clear: the page's own name")

	var none Sample
	webFacts(&none, []*server.Record{{Kind: "conn", Listener: "dot", SNI: "resolver.test"}})
	require.Empty(t, none.ECH)
	require.Empty(t, none.OuterSNI)
}

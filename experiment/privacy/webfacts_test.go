package privacy

import (
	"context"
	"testing"
	"time"

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

// TestServedWaitsForTheSamplesConnection: a sample's web facts wait for
// the server's record of its completed connection, which the server's
// goroutine may add after the client has closed it (a 0-RTT sample on a
// busy machine): not for another port's, nor for a rejected connection
// of its own (a stale ECH config's, before the retry); and a retried
// sample for both its connections' records, in either order.
func TestServedWaitsForTheSamplesConnection(t *testing.T) {
	var web server.RecordLog
	mark := web.Mark()
	web.Add(&server.Record{Kind: "conn", Listener: "web", Remote: "10.0.0.1:4000", ECH: ech.Accepted})
	web.Add(&server.Record{Kind: "conn", Listener: "web", Remote: "10.0.0.1:4001", ECH: ech.Rejected, Error: "ech_required"})
	web.Add(&server.Record{Kind: "conn", Listener: "doh", Remote: "10.0.0.1:4001"})
	go func() {
		time.Sleep(50 * time.Millisecond)
		web.Add(&server.Record{Kind: "conn", Listener: "web", Remote: "10.0.0.1:4001", ECH: ech.Accepted, OuterSNI: publicName})
	}()
	var s Sample
	webFacts(&s, served(context.Background(), &web, mark, 4001, 1))
	require.Equal(t, publicName, s.OuterSNI, "the record added after the sample's end")

	// A failed sample, or none made, takes what there is.
	require.Len(t, served(context.Background(), &web, mark, 4002, 0), 4)
	require.Len(t, served(context.Background(), &web, mark, 0, 1), 4)

	// A retried sample waits for both its connections' records, the
	// rejected one's coming after the retry's (its client's abort
	// reached the server late).
	mark = web.Mark()
	web.Add(&server.Record{Kind: "conn", Listener: "web", Remote: "10.0.0.1:4003", ECH: ech.Accepted, OuterSNI: publicName})
	go func() {
		time.Sleep(50 * time.Millisecond)
		web.Add(&server.Record{Kind: "conn", Listener: "web", Remote: "10.0.0.1:4003", ECH: ech.Rejected, Error: "ech_required"})
	}()
	retried := Sample{Status: "ok", Retried: true}
	webFacts(&retried, served(context.Background(), &web, mark, 4003, retried.conns()))
	require.ElementsMatch(t, []string{ech.Accepted, ech.Rejected}, retried.ECH)
}

// TestLadderLabelsAndOrder: every rung of every part has a label as the
// ladder says it, and the parts rank in turn (DNS, web handshakes, page
// loads, Chromium), each in its own list's order, with no two cells at
// one place.
func TestLadderLabelsAndOrder(t *testing.T) {
	require.Equal(t, "name in clear", rungLabel("web", Clear))
	require.Equal(t, "ECH, stale config", rungLabel("web", ECHStale))
	require.Equal(t, "DNS on the page's connection + ECH", rungLabel("page", pageRung(Coalesced, true)))
	require.Equal(t, "Chromium, "+rungLabel("dns", "doh2")+", name in clear", rungLabel("browser", pageRung("doh2", false)))

	seen := map[int]string{}
	last := -1
	place := func(part, rung, cond string) {
		r := rank(part, rung, cond)
		name := part + " " + rung + " " + cond
		require.NotEmpty(t, rungLabel(part, rung), name)
		require.Greater(t, r, last, "%s after %s", name, seen[last])
		seen[r], last = name, r
	}
	for _, c := range dnsCells {
		place("dns", c.rung, c.cond)
	}
	for _, c := range webCells {
		place("web", c.rung, c.cond)
	}
	for _, d := range pageRungs {
		place("page", d.rung(), "")
	}
	for _, d := range browserRungs {
		place("browser", d.rung(), "")
	}
	require.Len(t, seen, len(dnsCells)+len(webCells)+len(pageRungs)+len(browserRungs))
}

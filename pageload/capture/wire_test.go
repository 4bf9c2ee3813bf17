package capture_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/pageload/capture"
)

// TestMatchWire pairs a trace's requests with a capture's streams on
// another clock, takes each body's end from the wire, and builds the
// graph's gaps from there: a script's child and the onload gap count
// from the script's last octet, 5 ms before DevTools registered it, and
// the document's from navigation less its lookup and handshake as the
// packets show them.
func TestMatchWire(t *testing.T) {
	doc := &browser.TracedRequest{URL: "https://p.test/", Type: "Document", Initiator: "other", Sent: 1000, WireSent: 1020, Response: 1035,
		Chunks: []browser.Chunk{{At: 1036, Total: 500}}, Finished: 1037, Size: 500}
	js := &browser.TracedRequest{URL: "https://p.test/a.js", Type: "Script", Initiator: "parser", InitiatorURL: "https://p.test/", Sent: 1038, WireSent: 1038.2,
		Response: 1060, Chunks: []browser.Chunk{{At: 1066, Total: 900}}, Finished: 1067, Size: 900}
	img := &browser.TracedRequest{URL: "https://p.test/b.png", Type: "Image", Initiator: "script", InitiatorURL: "https://p.test/a.js", Sent: 1080, WireSent: 1080.3,
		Response: 1100, Chunks: []browser.Chunk{{At: 1101, Total: 100}}, Finished: 1101, Size: 100}
	tr := &browser.NetTrace{Requests: []*browser.TracedRequest{doc, js, img}, LoadEvent: 1111}

	epoch := time.Date(2026, 11, 24, 18, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return epoch.Add(time.Duration(ms * float64(time.Millisecond))) } // the capture's clock: the trace's + epoch
	streams := []capture.WireStream{
		{Request: at(1020.1), Last: at(1036.5)},
		{Request: at(1038.3), Last: at(1062)},        // 5 ms before DevTools' end
		{Request: at(1080.2), Last: at(1100.6)},      // the image
		{Conn: 2, Request: at(1500), Last: at(1520)}, // another load's
	}
	// Connection 1 is the resolver's: the lookup takes 5 ms on the wire,
	// the connection 14 to the request (its first packet at 1006.1).
	packets := []capture.WirePacket{
		{Conn: 1, At: at(990), Up: true}, // before navigation: not the page's
		{Conn: 1, At: at(1000.5), Up: true}, {Conn: 1, At: at(1005.5)},
		{Conn: 0, At: at(1006.1), Up: true}, {Conn: 0, At: at(1011)}, {Conn: 1, At: at(1012)}, {Conn: 0, At: at(1019.6)},
		{Conn: 0, At: at(1020.1), Up: true}, {Conn: 0, At: at(1036.5)},
	}
	w := capture.Wire{Streams: streams, Packets: packets}
	require.Equal(t, 3, capture.MatchWire(tr, w))
	// The clocks' offset is known to the sends' agreement, tenths of a ms.
	require.InDelta(t, 1062, js.WireEnd, 0.25)
	require.InDelta(t, 1100.6, img.WireEnd, 0.25)
	require.InDelta(t, 5+14, doc.WireSetup, 0.01)

	g, err := capture.FromTrace("https://p.test/", &browser.Load{Status: browser.LoadOK, PLTMs: 111}, tr, pageload.Provenance{})
	require.NoError(t, err)
	require.Equal(t, 3, g.WireEnds())
	require.InDelta(t, 62, g.Resources[1].WireEndMs, 0.25)
	require.InDelta(t, 67, g.Resources[1].EndMs, 1e-6)
	require.InDelta(t, 1080.3-1062, g.Resources[2].GapMs, 0.25, "the image's gap from the script's last octet")
	require.InDelta(t, 1111-1100.6, g.OnloadGapMs, 0.25, "the onload gap from the last octet")
	require.InDelta(t, 1020-1000-19, g.Resources[0].GapMs, 0.25, "the document's gap: the browser's part of its path")

	// A stream that ends after DevTools said the body did is not its.
	for _, r := range tr.Requests {
		r.WireEnd = 0
	}
	streams[1].Last = at(1070)
	require.Equal(t, 2, capture.MatchWire(tr, w))
	require.Zero(t, js.WireEnd)
	// A page of one request: its one stream.
	one := &browser.TracedRequest{URL: "https://p.test/", Type: "Document", Sent: 1000, WireSent: 1020, Finished: 1037, Size: 500}
	require.Equal(t, 1, capture.MatchWire(&browser.NetTrace{Requests: []*browser.TracedRequest{one}}, capture.Wire{Streams: streams[:1]}))
	require.InDelta(t, 1036.5, one.WireEnd, 0.25)
	// The document asked in 0-RTT, with its connection's first packet:
	// the lookup only.
	early := &browser.TracedRequest{URL: "https://p.test/", Type: "Document", Sent: 1000, WireSent: 1006.2, Finished: 1030, Size: 500}
	require.Equal(t, 1, capture.MatchWire(&browser.NetTrace{Requests: []*browser.TracedRequest{early}}, capture.Wire{
		Streams: []capture.WireStream{{Request: at(1006.1), Last: at(1029)}},
		Packets: []capture.WirePacket{{Conn: 1, At: at(1000.5), Up: true}, {Conn: 1, At: at(1005.5)}, {Conn: 0, At: at(1006.1), Up: true}, {Conn: 0, At: at(1021)}},
	}))
	require.InDelta(t, 5, early.WireSetup, 0.01)
	// On a busy machine the document's DevTools send time drifts from its
	// first octet by ms: it is still its stream (docTolerance, 5 ms), a
	// script's is not (wireTolerance, 1 ms).
	for _, r := range tr.Requests {
		r.WireEnd = 0
	}
	streams[1].Last = at(1062)
	drift := []capture.WireStream{{Request: at(1023.2), Last: at(1036.5)}, streams[1], streams[2]}
	require.Equal(t, 3, capture.MatchWire(tr, capture.Wire{Streams: drift}))
	require.InDelta(t, 1036.5, doc.WireEnd, 0.25)
	for _, r := range tr.Requests {
		r.WireEnd = 0
	}
	drift[0].Request, drift[1].Request = at(1020.1), at(1041.3)
	require.Equal(t, 2, capture.MatchWire(tr, capture.Wire{Streams: drift}))
	require.Zero(t, js.WireEnd, "3 ms off: not the script's stream")
	// Nothing near: nothing matched.
	require.Zero(t, capture.MatchWire(tr, capture.Wire{Streams: []capture.WireStream{{Request: at(5000), Last: at(5001)}}}))
}

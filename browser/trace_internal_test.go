package browser

import (
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/stretchr/testify/require"
)

// TestTracerReadsTheLoadsEvents: DevTools' events of a load, as Chromium
// sends them, become the trace a graph is built from: a redirect stays
// one request under its last URL, a script's initiator is the first
// frame with a URL up its async stacks, the wait before the wire less
// the lookup and connection is the browser's hold (never negative), a
// response without send timing (from a cache or a service worker) has
// no wire time, bodies count their chunks, a failure ends its request,
// the first load event counts, and events of other requests or after
// the trace are dropped.
func TestTracerReadsTheLoadsEvents(t *testing.T) {
	tr := &tracer{trace: &NetTrace{}, byID: map[network.RequestID]*TracedRequest{}}
	at := func(ms float64) cdp.MonotonicTime { return cdp.MonotonicTime(ms / 1000) }
	sent := func(id, url string, ms float64, typ network.ResourceType, in *network.Initiator) *network.EventRequestWillBeSent {
		return &network.EventRequestWillBeSent{RequestID: network.RequestID(id), Request: &network.Request{URL: url, InitialPriority: network.ResourcePriorityHigh},
			Timestamp: at(ms), Type: typ, Initiator: in}
	}
	timing := func(base, dns0, dns1, conn0, conn1, send float64) *network.Response {
		return &network.Response{Timing: &network.ResourceTiming{RequestTime: base / 1000, DNSStart: dns0, DNSEnd: dns1, ConnectStart: conn0, ConnectEnd: conn1, SendStart: send}}
	}
	events := []any{
		sent("1", "https://p.test/", 1000, network.ResourceTypeDocument, &network.Initiator{Type: network.InitiatorTypeOther}),
		// Looked up for 5 ms, connected for 9, sent 2 ms after that.
		&network.EventResponseReceived{RequestID: "1", Timestamp: at(1030), Response: timing(1000, 1, 6, 6, 15, 16)},
		&network.EventDataReceived{RequestID: "1", Timestamp: at(1031), DataLength: 100},
		&network.EventDataReceived{RequestID: "1", Timestamp: at(1035), DataLength: 200},
		&network.EventLoadingFinished{RequestID: "1", Timestamp: at(1036)},

		sent("2", "https://p.test/a.js", 1037, network.ResourceTypeScript, &network.Initiator{Type: network.InitiatorTypeParser, URL: "https://p.test/"}),
		func() any {
			e := sent("2", "https://cdn.test/a.js", 1050, network.ResourceTypeScript, nil)
			e.RedirectResponse = &network.Response{Status: 302}
			return e
		}(),
		// From a cache: no send time.
		&network.EventResponseReceived{RequestID: "2", Timestamp: at(1052), Response: timing(1037, -1, -1, -1, -1, -1)},
		&network.EventDataReceived{RequestID: "2", Timestamp: at(1053), DataLength: 50},
		&network.EventLoadingFinished{RequestID: "2", Timestamp: at(1054)},

		// Redirected twice (the hops 12 and 8 ms), then connected for
		// 4 ms and sent 1 ms after: held 1 ms, not the redirects' 20.
		sent("4", "http://p.test/c.css", 1055, network.ResourceTypeStylesheet, nil),
		func() any {
			e := sent("4", "https://p.test/c.css", 1067, network.ResourceTypeStylesheet, nil)
			e.RedirectResponse = &network.Response{Status: 301}
			return e
		}(),
		func() any {
			e := sent("4", "https://cdn.test/c.css", 1075, network.ResourceTypeStylesheet, nil)
			e.RedirectResponse = &network.Response{Status: 302}
			return e
		}(),
		&network.EventResponseReceived{RequestID: "4", Timestamp: at(1090), Response: timing(1075, -1, -1, 0, 4, 5)},

		// Named by a callback: the frames on top have no URL, an async
		// parent's has.
		sent("3", "https://p.test/b.png", 1060, network.ResourceTypeImage, &network.Initiator{Type: network.InitiatorTypeScript, Stack: &runtime.StackTrace{
			CallFrames: []*runtime.CallFrame{{FunctionName: "anonymous"}},
			Parent:     &runtime.StackTrace{CallFrames: []*runtime.CallFrame{{}, {URL: "https://cdn.test/a.js"}, {URL: "https://p.test/later.js"}}},
		}}),
		// Its send time lies before its announcement (another process's
		// clock, rounded): no negative hold.
		&network.EventResponseReceived{RequestID: "3", Timestamp: at(1070), Response: timing(1059, -1, -1, -1, -1, 0.5)},
		&network.EventLoadingFailed{RequestID: "3", Timestamp: at(1071), ErrorText: "net::ERR_ABORTED"},

		&network.EventDataReceived{RequestID: "99", Timestamp: at(1072), DataLength: 7}, // not this trace's
		&page.EventLoadEventFired{Timestamp: at(1080)},
		&page.EventLoadEventFired{Timestamp: at(1200)}, // a later navigation's
	}
	for _, e := range events {
		tr.on(e)
	}
	got := tr.trace
	require.Len(t, got.Requests, 4, "a redirect is the same request")
	require.InDelta(t, 1080, got.LoadEvent, 1e-9, "the first load event")

	doc, js, css, img := got.Requests[0], got.Requests[1], got.Requests[2], got.Requests[3]
	require.Equal(t, "https://cdn.test/c.css", css.URL)
	require.InDelta(t, 1055, css.Sent, 1e-9)
	require.InDelta(t, 20, css.Redirected, 1e-9, "from the first hop to the last")
	require.InDelta(t, 1080, css.WireSent, 1e-9)
	require.InDelta(t, 1, css.Held, 1e-9, "the browser's own hold, without the redirects' round trips")
	require.Zero(t, doc.Redirected)
	require.Equal(t, "Document", doc.Type)
	require.Equal(t, "other", doc.Initiator)
	require.InDelta(t, 1016, doc.WireSent, 1e-9)
	require.InDelta(t, 2, doc.Held, 1e-9, "the wait less the lookup and connection")
	require.Equal(t, int64(300), doc.Size)
	require.Equal(t, []Chunk{{At: 1031, Total: 100}, {At: 1035, Total: 300}}, roundChunks(doc.Chunks))
	require.InDelta(t, 1036, doc.Finished, 1e-9)
	require.Empty(t, doc.Failed)

	require.Equal(t, "https://cdn.test/a.js", js.URL, "the last URL of a redirect is what loads")
	require.Equal(t, "parser", js.Initiator)
	require.Equal(t, "https://p.test/", js.InitiatorURL)
	require.InDelta(t, 1037, js.Sent, 1e-9, "sent when the first hop was")
	require.Zero(t, js.WireSent, "no send time, no wire time")
	require.Zero(t, js.Held)
	require.InDelta(t, 13, js.Redirected, 1e-9)
	require.Equal(t, int64(50), js.Size)

	require.Equal(t, "script", img.Initiator)
	require.Equal(t, "https://cdn.test/a.js", img.InitiatorURL, "the first frame with a URL, up the async stack")
	require.Zero(t, img.Held, "never negative")
	require.Equal(t, "net::ERR_ABORTED", img.Failed)
	require.InDelta(t, 1071, img.Finished, 1e-9)

	// After the load, nothing more is taken in.
	tr.trace = nil
	require.NotPanics(t, func() { tr.on(sent("4", "https://p.test/late", 1300, network.ResourceTypeFetch, nil)) })
	require.Len(t, got.Requests, 4)
}

// roundChunks rounds the chunks' times to the µs: they went through
// seconds in floating point.
func roundChunks(cs []Chunk) []Chunk {
	out := make([]Chunk, len(cs))
	for i, c := range cs {
		out[i] = Chunk{At: float64(int64(c.At*1000+0.5)) / 1000, Total: c.Total}
	}
	return out
}

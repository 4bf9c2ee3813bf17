package pageload_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
)

// TestFromTrace builds a graph from a trace as DevTools reports a load:
// a style sheet the parser found mid-document, a font the style sheet
// asked for, an image a script asked for after running (no stack), a
// request after the load event and a data: URL, both left out.
func TestFromTrace(t *testing.T) {
	doc := &browser.TracedRequest{ID: "1", URL: "https://p.test/", Type: "Document", Initiator: "other", Sent: 1000, WireSent: 1025, Response: 1040,
		Chunks: []browser.Chunk{{At: 1041, Total: 1000}, {At: 1050, Total: 5000}}, Finished: 1050, Size: 5000}
	css := &browser.TracedRequest{ID: "2", URL: "https://p.test/a.css", Type: "Stylesheet", Initiator: "parser", InitiatorURL: "https://p.test/", Sent: 1042,
		Response: 1080, Chunks: []browser.Chunk{{At: 1081, Total: 300}}, Finished: 1081, Size: 300}
	js := &browser.TracedRequest{ID: "3", URL: "https://cdn.test/b.js", Type: "Script", Initiator: "parser", InitiatorURL: "https://p.test/", Sent: 1052,
		Response: 1090, Chunks: []browser.Chunk{{At: 1091, Total: 800}}, Finished: 1092, Size: 800}
	font := &browser.TracedRequest{ID: "4", URL: "https://p.test/f.woff2", Type: "Font", Initiator: "parser", InitiatorURL: "https://p.test/a.css", Sent: 1100,
		Finished: 1140, Size: 9000, Chunks: []browser.Chunk{{At: 1140, Total: 9000}}}
	img := &browser.TracedRequest{ID: "5", URL: "https://p.test/c.png", Type: "Image", Initiator: "script", Sent: 1120, Finished: 1160, Size: 2000,
		Chunks: []browser.Chunk{{At: 1160, Total: 2000}}}
	// Inserted on DOMContentLoaded by the script: Chromium names the document.
	inserted := &browser.TracedRequest{ID: "8", URL: "https://p.test/d.png", Type: "Image", Initiator: "parser", InitiatorURL: "https://p.test/", Sent: 1130,
		Finished: 1150, Size: 100, Chunks: []browser.Chunk{{At: 1150, Total: 100}}}
	late := &browser.TracedRequest{ID: "6", URL: "https://p.test/beacon", Type: "Ping", Initiator: "script", Sent: 1300}
	data := &browser.TracedRequest{ID: "7", URL: "data:image/png;base64,AAAA", Type: "Image", Initiator: "parser", Sent: 1043}
	tr := &browser.NetTrace{Requests: []*browser.TracedRequest{doc, css, data, js, font, img, inserted, late}, LoadEvent: 1175}
	g, err := pageload.FromTrace("https://p.test/", &browser.Load{Status: browser.LoadOK, PLTMs: 180}, tr, pageload.Provenance{Browser: "Chrome/1", At: time.Unix(0, 0)})
	require.NoError(t, err)
	require.Len(t, g.Resources, 6)
	want := []struct {
		url    string
		parent int
		after  int64
		gap    float64
	}{
		{"https://p.test/", -1, 0, 5},          // navigation (PLT 180 ms, load event 175 ms after Sent) 5 ms before DevTools' Sent
		{"https://p.test/a.css", 0, 1000, 1},   // mid-document: after the first 1000 octets, 1 ms later
		{"https://cdn.test/b.js", 0, 5000, 2},  // after the whole document
		{"https://p.test/f.woff2", 1, 300, 19}, // the style sheet's, 19 ms after it ended
		{"https://p.test/c.png", 2, 800, 28},   // the script that ended last before it, 28 ms of execution
	}
	for i, w := range want {
		r := g.Resources[i]
		require.Equal(t, w.url, r.URL)
		require.Equal(t, w.parent, r.Parent, w.url)
		require.Equal(t, w.after, r.AfterBytes, w.url)
		require.InDelta(t, w.gap, r.GapMs, 1e-9, w.url)
	}
	require.InDelta(t, 30, g.Resources[0].SentMs, 1e-9, "the document on the wire after its lookup and connection, from navigation")
	require.InDelta(t, 47, g.Resources[1].SentMs, 1e-9, "the style sheet's request, from navigation")
	require.InDelta(t, 86, g.Resources[1].EndMs, 1e-9)
	require.InDelta(t, 15, g.OnloadGapMs, 1e-9, "load event 15 ms after the last resource")
	require.Equal(t, []string{"p.test", "cdn.test"}, g.Hosts())

	img.Failed = "net::ERR_CONNECTION_REFUSED"
	_, err = pageload.FromTrace("https://p.test/", &browser.Load{Status: browser.LoadOK}, tr, pageload.Provenance{})
	require.ErrorContains(t, err, "c.png failed")
}

func TestGraphCheck(t *testing.T) {
	for _, g := range []*pageload.Graph{
		{Page: "x"},
		{Page: "x", Resources: []pageload.Resource{{URL: "ftp://x/", Parent: -1}}},
		{Page: "x", Resources: []pageload.Resource{{URL: "https://x/", Parent: -1}, {URL: "https://x/a", Parent: 1}}},
		{Page: "x", Resources: []pageload.Resource{{URL: "https://x/", Parent: -1, Size: 10}, {URL: "https://x/a", Parent: 0, AfterBytes: 11}}},
		{Page: "x", Resources: []pageload.Resource{{URL: "https://x/", Parent: -1}, {URL: "https://x/a", Parent: 0, GapMs: -1}}},
	} {
		require.Error(t, g.Check())
	}
}

// TestMedianGraph chooses among loads of different network conditions by
// the browser's own time, not by PLT: the slow network's load had the
// median PLT, the fast one's the median browser time.
func TestMedianGraph(t *testing.T) {
	graph := func(plt, gap, onload float64) *pageload.Graph {
		return &pageload.Graph{Page: "https://p.test/", PLTMs: plt, OnloadGapMs: onload, Resources: []pageload.Resource{
			{URL: "https://p.test/", Parent: -1, GapMs: -1},
			{URL: "https://p.test/a.js", Parent: 0, GapMs: gap},
			{URL: "https://p.test/b.png", Parent: 1, GapMs: 2},
			{URL: "https://p.test/c.png", Parent: 0, GapMs: 1},
		}}
	}
	fast := graph(100, 10, 5)  // browser: -1+10+2+5 = 16 ms
	slow := graph(150, 30, 10) // 41 ms
	dns := graph(120, 2, 4)    // a slower lookup, the browser quick: 7 ms
	require.InDelta(t, 16, fast.BrowserMs(), 1e-9)
	m := pageload.MedianGraph([]*pageload.Graph{slow, dns, fast})
	require.Equal(t, 100.0, m.PLTMs, "the median browser time's load")
	require.Equal(t, 3, m.Captured.Loads)
	require.Zero(t, fast.Captured.Loads, "the captures are left as they were")
	require.Nil(t, pageload.MedianGraph(nil))
}

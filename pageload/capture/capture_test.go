package capture_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/pageload/capture"
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
	g, err := capture.FromTrace("https://p.test/", &browser.Load{Status: browser.LoadOK, PLTMs: 180}, tr, pageload.Provenance{Browser: "Chrome/1", At: time.Unix(0, 0)})
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
	_, err = capture.FromTrace("https://p.test/", &browser.Load{Status: browser.LoadOK}, tr, pageload.Provenance{})
	require.ErrorContains(t, err, "c.png failed")
}

// TestRedirectsKeepTheirTime: a replay makes no redirect, so a
// redirected request's gap keeps its redirects' time beside the
// browser's hold: the style sheet, found 1 ms after the document's
// first 1000 octets, redirected for 20 ms and held 1, waits 22 ms; the
// document, redirected for 30 ms, is on the wire 30 ms later than
// without.
func TestRedirectsKeepTheirTime(t *testing.T) {
	doc := &browser.TracedRequest{ID: "1", URL: "https://www.p.test/", Type: "Document", Initiator: "other", Sent: 1000, Redirected: 30, Held: 2,
		Response: 1070, Chunks: []browser.Chunk{{At: 1071, Total: 1000}, {At: 1080, Total: 5000}}, Finished: 1080, Size: 5000}
	css := &browser.TracedRequest{ID: "2", URL: "https://cdn.p.test/a.css", Type: "Stylesheet", Initiator: "parser", InitiatorURL: "https://www.p.test/",
		Sent: 1072, Redirected: 20, Held: 1, Response: 1130, Chunks: []browser.Chunk{{At: 1131, Total: 300}}, Finished: 1131, Size: 300}
	tr := &browser.NetTrace{Requests: []*browser.TracedRequest{doc, css}, LoadEvent: 1140}
	g, err := capture.FromTrace("https://www.p.test/", &browser.Load{Status: browser.LoadOK, PLTMs: 145}, tr, pageload.Provenance{})
	require.NoError(t, err)
	require.Len(t, g.Resources, 2)
	require.InDelta(t, 22, g.Resources[1].GapMs, 1e-9)
	require.Equal(t, int64(1000), g.Resources[1].AfterBytes)
	plain := *doc
	plain.Redirected = 0
	g0, err := capture.FromTrace("https://www.p.test/", &browser.Load{Status: browser.LoadOK, PLTMs: 145}, &browser.NetTrace{Requests: []*browser.TracedRequest{&plain}, LoadEvent: 1140}, pageload.Provenance{})
	require.NoError(t, err)
	require.InDelta(t, 30, g.Resources[0].GapMs-g0.Resources[0].GapMs, 1e-9, "the document's redirects")
}

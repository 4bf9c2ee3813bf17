// Package capture turns a traced Chromium load into the dependency graph
// doxlab's page loader replays (pageload.Graph): the only part of the
// page-load path that reads the browser's trace, so the loader itself
// links no browser driver.
package capture

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
)

// FromTrace builds a page's dependency graph from a traced Chromium load
// (browser.Trace): the document is the root; each other request's parent
// is the resource that initiated it (the document or style sheet the
// parser found it in, the script on top of the stack), its discovery
// point the parent's body octets that had arrived when it was requested,
// and its gap the time from their arrival (or the parent's end: its last
// octet's arrival where MatchWire found it, DevTools' end otherwise) to
// the request. Requests made after the load event are left out: they are
// not part of PLT.
func FromTrace(page string, l *browser.Load, tr *browser.NetTrace, prov pageload.Provenance) (*pageload.Graph, error) {
	if l == nil || l.Status != browser.LoadOK {
		why := "no load"
		if l != nil {
			why = l.Status + ": " + l.Error
		}
		return nil, fmt.Errorf("capturing %s: the load failed (%s)", page, why)
	}
	var reqs []*browser.TracedRequest
	for _, r := range tr.Requests {
		if !strings.HasPrefix(r.URL, "https://") && !strings.HasPrefix(r.URL, "http://") {
			continue // data: and blob: URLs cost no network
		}
		if tr.LoadEvent > 0 && r.Sent > tr.LoadEvent {
			continue
		}
		if r.Failed != "" {
			return nil, fmt.Errorf("capturing %s: %s failed: %s", page, r.URL, r.Failed)
		}
		reqs = append(reqs, r)
	}
	root := slices.IndexFunc(reqs, func(r *browser.TracedRequest) bool { return r.Type == "Document" })
	if root < 0 {
		return nil, fmt.Errorf("capturing %s: no document request in the trace", page)
	}
	// The document first; the rest in the order requested.
	doc := reqs[root]
	reqs = append([]*browser.TracedRequest{doc}, slices.Delete(reqs, root, root+1)...)
	g := &pageload.Graph{Page: reqs[0].URL, Captured: prov, PLTMs: l.PLTMs}
	// The graph's times, like a replay's, count from the navigation's
	// start. DevTools announces the document's request (Sent) about a ms
	// later; the PLT, from navigation, less the load event's time from
	// that announcement says how much (at most navSlack: more would be
	// the two clocks disagreeing).
	nav := doc.Sent
	if tr.LoadEvent > 0 {
		nav -= min(max(0, l.PLTMs-(tr.LoadEvent-doc.Sent)), navSlack)
	}
	index := map[string]int{}
	lastEnd := 0.0
	for i, r := range reqs {
		res := pageload.Resource{URL: r.URL, Type: r.Type, Priority: r.Priority, Parent: -1, Size: r.Size,
			SentMs: round3(wireSent(r) - nav), EndMs: round3(r.Finished - nav)}
		if r.WireEnd > 0 {
			res.WireEndMs = round3(r.WireEnd - nav)
		}
		if i == 0 {
			res.GapMs = round3(docGap(r, nav))
		} else {
			res.Parent = parentOf(r, reqs[:i], index)
			res.AfterBytes, res.GapMs = discovery(r, reqs[res.Parent])
		}
		if _, ok := index[r.URL]; !ok {
			index[r.URL] = i
		}
		lastEnd = math.Max(lastEnd, bodyEnd(r))
		g.Resources = append(g.Resources, res)
	}
	if tr.LoadEvent > 0 {
		g.OnloadGapMs = round3(math.Max(0, tr.LoadEvent-lastEnd))
	}
	return g, g.Check()
}

// parentOf is the request r waited for. That is the one its initiator
// names, unless that is the document and a script ended between the
// document's end and r: Chromium
// names the document as the initiator of what a script inserts into it
// (images made on DOMContentLoaded) and of what the parser finds only
// after a blocking script ran, so r waited for that script (the one that
// ended last before it), not for the document. A script initiator
// without a stack is treated the same way; failing all, the document.
func parentOf(r *browser.TracedRequest, earlier []*browser.TracedRequest, index map[string]int) int {
	p, named := index[r.InitiatorURL]
	if !named && r.Initiator != "script" {
		return 0
	}
	after := -1.0 // scripts that ended after this count
	if named {
		if earlier[p].Type != "Document" || earlier[p].Finished == 0 || earlier[p].Finished > r.Sent {
			return p // found while the parent streamed in, or named by a style sheet or script
		}
		after = earlier[p].Finished
	}
	best, bestEnd := p, after
	for i, e := range earlier {
		if e.Type == "Script" && e.Finished > bestEnd && e.Finished <= r.Sent {
			best, bestEnd = i, e.Finished
		}
	}
	return best
}

// discovery is how much of the parent had arrived when r was asked for,
// and how long after that arrival it was.
func discovery(r, parent *browser.TracedRequest) (afterBytes int64, gapMs float64) {
	sent := heldUntil(r)
	if parent.Finished > 0 && parent.Finished <= r.Sent {
		return parent.Size, round3(sent - bodyEnd(parent))
	}
	var at float64
	for _, c := range parent.Chunks {
		if c.At > r.Sent {
			break
		}
		afterBytes, at = c.Total, c.At
	}
	if afterBytes == 0 { // before any of the body: on the headers (a Link header, a preload)
		at = parent.Response
	}
	if at == 0 || at > r.Sent {
		return afterBytes, round3(r.Redirected + r.Held)
	}
	return afterBytes, round3(sent - at)
}

// docGap is the browser's time from navigation (nav) to the document's
// request on the wire, less its lookup and connection, which a replay
// makes itself: as the wire saw them where MatchWire measured them, else
// as DevTools reported them. From the wire it may be negative: the
// browser's lookup left before the navigation's start was stamped (by
// up to 2.6 ms on fiber).
func docGap(doc *browser.TracedRequest, nav float64) float64 {
	if doc.WireSetup > 0 {
		return doc.WireSent - nav - doc.WireSetup
	}
	return heldUntil(doc) - nav
}

// bodyEnd is when r's body ended: its last octet's arrival where a
// capture gave it, else DevTools' end. A replay's body ends as its last
// octet arrives, so counted from there the gaps after it keep the
// browser's own intake of the body (1-19 ms per body on fiber).
func bodyEnd(r *browser.TracedRequest) float64 {
	if r.WireEnd > 0 {
		return r.WireEnd
	}
	return r.Finished
}

// wireSent is when r's request went on the wire: after its lookup and
// connection, unlike the discovery gap, which leaves them to the replay.
func wireSent(r *browser.TracedRequest) float64 {
	if r.WireSent > 0 {
		return r.WireSent
	}
	return heldUntil(r)
}

// heldUntil is when r, discovered at Sent, was ready for the wire but
// for its lookup and connection: after its redirects, which a replay
// does not make, and the browser's hold.
func heldUntil(r *browser.TracedRequest) float64 { return r.Sent + r.Redirected + r.Held }

// round3 rounds to the µs, as the loader's own times are.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

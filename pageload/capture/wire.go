package capture

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/doxlab/doxlab/browser"
)

// Wire is a packet capture of a traced load on the client's link: its
// request streams, decrypted, and every packet to or from the resolver
// and the page servers, each with its connection.
type Wire struct {
	Streams []WireStream
	Packets []WirePacket
}

// WireStream is one request stream as the capture saw it (package
// overhead decrypts and times them).
type WireStream struct {
	Conn          int       // the connection it went on
	Request, Last time.Time // the request's first octet out, the answer's last in
}

// WirePacket is one packet of the capture.
type WirePacket struct {
	Conn int // a connection to the resolver or a page server, as WireStream's
	At   time.Time
	Up   bool // from the client
}

// wireTolerance is how far apart, in ms, a request's DevTools send time
// and its first octet in the capture may be and still be the same
// request. DevTools' sendStart and the wire agree within tenths of a ms
// (15 requests of a capture on fiber: 1.2 ms in all).
const wireTolerance = 1.0

// docTolerance is wireTolerance for the document, the load's first
// request, where nothing else of the load is sent for at least a round
// trip. Its DevTools send time and its first octet drift further apart
// on a busy machine (1.6 and 3.2 ms seen beside two busy loops, mostly
// in 0-RTT, where the octet is the connection's first 0-RTT packet).
const docTolerance = 5.0

// MatchWire finds each traced request's stream in a capture of the same
// load and sets its WireEnd: when the body's last octet arrived, on the
// trace's clock. DevTools registers a body's end some ms after that
// (1-19 ms on fiber for a page's scripts), while a replay's bodies end
// when their last octet arrives: the graph's gaps count from the wire's
// end (FromTrace). The two clocks differ by an offset, found as the one
// that pairs the most requests with streams. It returns how many
// requests it matched. With the offset it also measures the document's
// set-up on the wire (docSetup).
func MatchWire(tr *browser.NetTrace, w Wire) int {
	streams := w.Streams
	var reqs []*browser.TracedRequest
	for _, r := range tr.Requests {
		if r.WireSent > 0 {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 || len(streams) == 0 {
		return 0
	}
	ms := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }
	sent := make([]float64, len(streams))
	for i, s := range streams {
		sent[i] = ms(s.Request)
	}
	slices.Sort(sent)
	wireSent := make([]float64, len(reqs))
	for i, r := range reqs {
		wireSent[i] = r.WireSent
	}
	slices.Sort(wireSent)
	// pairs counts the requests that get a stream of their own within
	// the tolerance at offset off, and their total distance. Each stream
	// carries one request: counting every request with some stream near
	// it instead, an offset between two of a burst's requests (sent a ms
	// apart) paired more of them than the true one, and every request
	// took its neighbour's stream. In order, each request takes the
	// first stream left in its window, which pairs the most.
	pairs := func(off float64) (n int, dist float64) {
		j := 0
		for _, ws := range wireSent {
			at := ws + off
			for j < len(sent) && sent[j] < at-wireTolerance {
				j++
			}
			if j < len(sent) && sent[j] <= at+wireTolerance {
				n, dist = n+1, dist+math.Abs(sent[j]-at)
				j++
			}
		}
		return n, dist
	}
	best, bestN, bestDist := 0.0, 0, math.Inf(1)
	for _, r := range reqs {
		for _, s := range sent {
			off := s - r.WireSent
			if n, d := pairs(off); n > bestN || (n == bestN && d < bestDist) {
				best, bestN, bestDist = off, n, d
			}
		}
	}
	if bestN == 0 || 2*bestN < len(reqs) {
		return 0 // not this load's capture, or too little of it
	}
	// Each request takes its nearest stream, the closest pairs first.
	type pair struct {
		r *browser.TracedRequest
		s int
		d float64
	}
	var ps []pair
	for _, r := range reqs {
		tol := wireTolerance
		if r.Type == "Document" {
			tol = docTolerance
		}
		for i, s := range streams {
			if d := math.Abs(ms(s.Request) - (r.WireSent + best)); d <= tol && !s.Last.IsZero() {
				ps = append(ps, pair{r, i, d})
			}
		}
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(a.d, b.d) })
	usedR, usedS := map[*browser.TracedRequest]bool{}, map[int]bool{}
	web := map[int]bool{} // the connections that carried the load's requests
	var doc *browser.TracedRequest
	docConn, docSent := -1, 0.0
	n := 0
	for _, p := range ps {
		if usedR[p.r] || usedS[p.s] {
			continue
		}
		end := ms(streams[p.s].Last) - best
		if p.r.Finished > 0 && end > p.r.Finished+wireTolerance {
			continue // after DevTools said the body ended: not its stream
		}
		usedR[p.r], usedS[p.s] = true, true
		p.r.WireEnd = end
		web[streams[p.s].Conn] = true
		if p.r.Type == "Document" && doc == nil {
			doc, docConn, docSent = p.r, streams[p.s].Conn, ms(streams[p.s].Request)-best
		}
		n++
	}
	if doc != nil {
		docSetup(doc, docSent, w.Packets, web, docConn, best)
	}
	return n
}

// navSlack is how long before the document's request DevTools announced
// (its Sent) the page's lookup may have left: the browser's time from
// navigation to that announcement is about a millisecond.
const navSlack = 5.0

// docSetup sets the document's WireSetup from the packets of the load on
// the trace's clock (the wire's, less off): its lookup is the resolver's
// connections' packets (any connection but the load's own, web), from the
// first one out to the last one in before the document's connection
// (conn) sent its first; its connection, from that first packet to the
// request's (at sent). The connection's part holds the browser's own
// work on the server's handshake flight (a millisecond or so on fiber:
// the certificate's verification), as a replay's handshake holds its
// own; a request in 0-RTT, sent with the connection's first packets,
// has none. Without the connection's first packet in view it is left
// unknown.
func docSetup(doc *browser.TracedRequest, sent float64, pkts []WirePacket, web map[int]bool, conn int, off float64) {
	from := doc.Sent - navSlack
	var q, a, c0 float64
	for _, p := range slices.SortedFunc(slices.Values(pkts), func(x, y WirePacket) int { return x.At.Compare(y.At) }) {
		t := float64(p.At.UnixNano())/1e6 - off
		if t < from || t > sent || c0 > 0 {
			continue
		}
		switch {
		case !web[p.Conn] && p.Up && q == 0:
			q = t
		case !web[p.Conn] && !p.Up && q > 0:
			a = t
		case p.Conn == conn && p.Up:
			c0 = t
		}
	}
	if c0 == 0 {
		return
	}
	doc.WireSetup = sent - c0
	if a > q {
		doc.WireSetup += a - q
	}
}

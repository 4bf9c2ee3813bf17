package capture_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/pageload/capture"
)

// TestMatchWireFindsEachRequestsStream: a page's requests sent in bursts
// (a parser's images leave within tenths of a ms of each other), the
// capture on a clock hours away and its send times off DevTools' by up to
// a fifth of a ms, some streams not captured, the streams in any order,
// another load's and the resolver's streams beside them: each captured
// request gets its own stream's end, on the trace's clock, and no other.
// Requests closer than the clocks' disagreement cannot be told apart by
// time, so the bursts here space them wider than that.
func TestMatchWireFindsEachRequestsStream(t *testing.T) {
	epoch := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	for seed := range testutil.Seeds(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			off := 3.6e6 * (1 + rng.Float64()) // the capture's clock: the trace's + an hour or two
			at := func(ms float64) time.Time { return epoch.Add(time.Duration((ms + off) * float64(time.Millisecond))) }
			noise := func() float64 { return (rng.Float64()*2 - 1) * 0.2 }

			var tr browser.NetTrace
			var streams []capture.WireStream
			wantEnd := map[*browser.TracedRequest]float64{}
			clock := 1000.0
			for burst := range 2 + rng.IntN(8) {
				clock += 5 + 25*rng.Float64()
				for i := range 1 + rng.IntN(6) {
					clock += 0.9 + rng.Float64()
					sent := clock
					r := &browser.TracedRequest{URL: fmt.Sprintf("https://p.test/%d-%d", burst, i), Type: "Image", Sent: sent - 0.1, WireSent: sent}
					if burst == 0 && i == 0 {
						r.Type = "Document"
					}
					end := sent + 5 + 40*rng.Float64()
					r.Finished = end + 1 + 15*rng.Float64() // DevTools registers the end later
					tr.Requests = append(tr.Requests, r)
					if rng.IntN(4) == 0 && !(burst == 0 && i == 0) {
						continue // not in the capture
					}
					streams = append(streams, capture.WireStream{Request: at(sent + noise()), Last: at(end)})
					wantEnd[r] = end
				}
			}
			// Another load's streams later, and a request stream of the
			// resolver's connection before the page's.
			for i := range 3 {
				streams = append(streams, capture.WireStream{Conn: 7, Request: at(clock + 500 + 3*float64(i)), Last: at(clock + 520)})
			}
			streams = append(streams, capture.WireStream{Conn: 9, Request: at(990), Last: at(996)})
			rng.Shuffle(len(streams), func(i, j int) { streams[i], streams[j] = streams[j], streams[i] })

			n := capture.MatchWire(&tr, capture.Wire{Streams: streams})
			if 2*len(wantEnd) < len(tr.Requests) {
				require.Zero(t, n, "too little of the load captured to find the clocks' offset")
				return
			}
			require.Equal(t, len(wantEnd), n, "every captured request matched")
			for _, r := range tr.Requests {
				end, ok := wantEnd[r]
				if !ok {
					require.Zero(t, r.WireEnd, "%s was not captured: no stream is its", r.URL)
					continue
				}
				require.InDelta(t, end, r.WireEnd, 0.21, "%s: its own stream's end", r.URL)
			}
		})
	}
}

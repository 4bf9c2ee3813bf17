package testbed

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestStageIsATailDropQueue: whatever the packets' sizes and arrivals,
// a rate-limited stage is a FIFO tail-drop queue in front of a link of
// that rate: a packet is dropped exactly when the queue, as a plain
// reference queue holds it, has no room for it under the byte, packet
// or time limit, and one it takes leaves when the link has sent it
// (after the packets before it, at the rate) plus the delay, to the
// nanosecond the rate gives.
func TestStageIsATailDropQueue(t *testing.T) {
	limits := []Direction{
		{Rate: 8e6, QueueBytes: 6000, Delay: 3 * time.Millisecond},
		{Rate: 1e6, QueuePackets: 7, Delay: 10 * time.Millisecond},
		{Rate: 20e6, QueueTime: 2 * time.Millisecond},
		{Rate: 2e6}, // the default, 1000 packets
	}
	for li, d := range limits {
		for seed := range testutil.Seeds(4) {
			rng := rand.New(rand.NewPCG(seed, uint64(li)))
			s := newStage(d, seed)
			type held struct {
				end  time.Time
				size int
			}
			var queue []held // the reference: packets the link has not finished
			var linkFree time.Time
			at := t0
			for i := range 3000 {
				at = at.Add(time.Duration(rng.ExpFloat64() * float64(400*time.Microsecond)))
				size := 40 + rng.IntN(1460)
				for len(queue) > 0 && !queue[0].end.After(at) {
					queue = queue[1:]
				}
				backlog := 0
				for _, q := range queue {
					backlog += q.size
				}
				var full bool
				switch {
				case d.QueueBytes > 0:
					full = backlog+size > d.QueueBytes
				case d.QueuePackets > 0:
					full = len(queue) >= d.QueuePackets
				case d.QueueTime > 0:
					full = linkFree.Sub(at) > d.QueueTime
				default:
					full = len(queue) >= 1000
				}
				out, ok := s.schedule(at, size)
				require.Equal(t, !full, ok, "limit %d seed %d packet %d: dropped when full, and only then", li, seed, i)
				if !ok {
					continue
				}
				start := at
				if linkFree.After(at) {
					start = linkFree
				}
				linkFree = start.Add(time.Duration(float64(size*8) / d.Rate * float64(time.Second)))
				queue = append(queue, held{linkFree, size})
				require.Equal(t, linkFree.Add(d.Delay), out, "limit %d seed %d packet %d", li, seed, i)
			}
			require.Equal(t, s.Sent+s.Dropped, uint64(3000))
			if li < 3 {
				require.Positive(t, s.Dropped, "limit %d seed %d: the arrivals overrun the link", li, seed)
			}
		}
	}
}

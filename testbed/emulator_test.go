package testbed

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPace checks when the reader may take packets in batches: only while
// every path it emulates has a delay that hides the wait.
func TestPace(t *testing.T) {
	e := newEmulator()
	hosts := map[string]*link{}
	for i, h := range []string{"client", "server", "web"} {
		l := &link{host: h, ip: net.IPv4(10, 0, 0, byte(i+1)), up: newStage(Direction{}, 1), down: newStage(Direction{}, 2)}
		require.NoError(t, e.add(l))
		hosts[h] = l
	}
	batch := func() time.Duration { e.pace(); return time.Duration(e.batch.Load()) }

	require.Zero(t, batch(), "undelayed paths need every packet read at once")

	hosts["client"].up.set(Direction{Delay: 7 * time.Millisecond})
	hosts["client"].down.set(Direction{Delay: 7 * time.Millisecond})
	require.Zero(t, batch(), "server and web still talk without delay through the emulator")

	for _, a := range []string{"server", "web"} {
		for _, b := range []string{"server", "web"} {
			if a != b {
				hosts[a].kernel[hosts[b].index].Store(true)
			}
		}
	}
	require.Equal(t, maxBatch, batch(), "the kernel forwards the undelayed paths; the rest have 7 ms")

	hosts["client"].down.set(Direction{Delay: time.Millisecond, Loss: 0.01})
	require.Zero(t, batch(), "1 ms towards the client is too short to hide a batch")
}

// TestSent checks how a kernel timestamp becomes a packet's start: its
// age counts, bounded, and a stamp that is no wall-clock time does not.
func TestSent(t *testing.T) {
	now := time.Now()
	ns := now.UnixNano()
	require.Equal(t, now, sent(now, 0), "no stamp: now")
	require.Equal(t, now.Add(-300*time.Microsecond), sent(now, ns-300e3), "the age counts")
	require.Equal(t, now.Add(-50*time.Millisecond), sent(now, ns-int64(200*time.Millisecond)), "bounded")
	require.Equal(t, now, sent(now, ns+1e3), "never in the future")
	require.Equal(t, now, sent(now, int64(6*time.Hour)), "a CLOCK_MONOTONIC stamp is none")
}

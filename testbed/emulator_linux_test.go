package testbed

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// TestLateness checks the lateness buckets: exact below 16 µs, at most
// 25 % wide above, and quantiles read from the difference of snapshots.
func TestLateness(t *testing.T) {
	for _, d := range []time.Duration{-time.Microsecond, 0, 3 * time.Microsecond, 15 * time.Microsecond, 16 * time.Microsecond,
		100 * time.Microsecond, 999 * time.Microsecond, 7 * time.Millisecond, time.Hour} {
		b := lateBucket(d)
		require.GreaterOrEqual(t, lateBound(b), d, "%v within bucket %d", d, b)
		if b > 0 && d < time.Hour {
			require.Less(t, lateBound(b-1), d+time.Microsecond, "%v not in an earlier bucket", d)
			require.LessOrEqual(t, float64(lateBound(b)), 1.25*float64(max(d, 16*time.Microsecond))+float64(time.Microsecond), "%v: bucket too wide", d)
		}
	}
	var l lateness
	for range 98 {
		l.add(3 * time.Microsecond)
	}
	before := lateCounts{}
	for i := range before {
		before[i] = l[i].Load()
	}
	for range 98 {
		l.add(4 * time.Microsecond)
	}
	l.add(time.Millisecond)
	l.add(time.Millisecond)
	var after lateCounts
	for i := range after {
		after[i] = l[i].Load()
	}
	d := after.since(before)
	require.Equal(t, 5*time.Microsecond, d.quantile(0.5), "the 3 µs ones are before the snapshot")
	require.InDelta(t, float64(time.Millisecond), float64(d.quantile(0.99)), 0.25*float64(time.Millisecond))
	require.Zero(t, lateCounts{}.quantile(0.5))
}

// TestWritersStayOnAllowedCPUs checks that the racing writers are pinned
// only to CPUs the process may use (as under taskset), and that one
// allowed CPU means one writer.
func TestWritersStayOnAllowedCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &all))
	defer unix.SchedSetaffinity(0, &all) // before the thread goes back to Go's pool
	e := newEmulator()
	require.Equal(t, 2, e.writers)
	require.Len(t, e.cpus, all.Count())

	one.Set(1)
	require.NoError(t, unix.SchedSetaffinity(0, &one))
	e = newEmulator()
	require.Equal(t, []int{1}, e.cpus)
	require.Equal(t, 1, e.writers, "two writers on one CPU cannot race")
}

package experiment

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/testbed"
)

// TestLinkOff: a link holds when each rate is delivered to 95 % of what
// its loss leaves and the RTT error's p99 is at most 1 ms; what was off
// is said with the numbers, and an RTT error with its likeliest cause,
// the first the check saw of a GC pause, the emulator's lateness and
// the hypervisor's steal, each at half the bound or more.
func TestLinkOff(t *testing.T) {
	p := testbed.Profile{Up: testbed.Direction{Rate: 10e6, Loss: 0.02}, Down: testbed.Direction{Rate: 50e6}}
	held := testbed.CheckResult{UpRate: 10e6, UpAchieved: 9.4e6, DownRate: 50e6, DownAchieved: 48e6, ErrP99: time.Millisecond}
	require.Empty(t, linkOff(&held, p), "9.4 of the 9.8 Mbit/s 2 % loss leaves is 96 %; a p99 of exactly 1 ms holds")

	slow := held
	slow.UpAchieved, slow.DownAchieved = 9.2e6, 20e6
	require.Equal(t, "up delivered 9.2 of 9.8 Mbit/s; down delivered 20.0 of 50.0 Mbit/s", linkOff(&slow, p))

	unlimited := testbed.CheckResult{ErrP99: 100 * time.Microsecond}
	require.Empty(t, linkOff(&unlimited, testbed.Profile{}), "no rate: nothing to deliver")

	for _, c := range []struct {
		res  testbed.CheckResult
		want string
	}{
		{testbed.CheckResult{ErrP99: 1400 * time.Microsecond}, "RTT error p99 1400 µs"},
		{testbed.CheckResult{ErrP99: 1400 * time.Microsecond, GCPauseMax: 800 * time.Microsecond, LateMax: 2 * time.Millisecond},
			"RTT error p99 1400 µs (a GC pause of up to 0.8 ms in the process that runs the emulator)"},
		{testbed.CheckResult{ErrP99: 1400 * time.Microsecond, GCPauseMax: 100 * time.Microsecond, LateMax: 2 * time.Millisecond, Steal: 5 * time.Millisecond},
			"RTT error p99 1400 µs (the emulator delivered a packet up to 2.0 ms late)"},
		{testbed.CheckResult{ErrP99: 1400 * time.Microsecond, Steal: 3 * time.Millisecond},
			"RTT error p99 1400 µs (the hypervisor took 3.0 ms of CPU meanwhile)"},
		// A stall of 0.94 s is not the emulator's 49.2 ms: none is named
		// its cause (the demo's report named it so).
		{testbed.CheckResult{ErrP99: 939821 * time.Microsecond, LateMax: 49200 * time.Microsecond, Steal: 2 * time.Millisecond},
			"RTT error p99 939821 µs (more than the causes the check measures: GC pauses up to 0.0 ms, the emulator up to 49.2 ms late, the hypervisor's steal 2.0 ms)"},
	} {
		require.Equal(t, c.want, linkOff(&c.res, testbed.Profile{}))
	}
}

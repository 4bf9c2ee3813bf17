package testbed

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNetemArgs: a direction as tc netem options, emulating what the
// userspace emulator does: its jitter, uniform in [0, Jitter) on top of
// the delay, as netem's ± around Delay + Jitter/2 (same range, same
// mean); Gilbert-Elliott's loss in the bad state as tc's "1-h" (tc
// turns it into the kernel's h, which keeps a packet in the bad state:
// passed h, a loss_bad of 1 lost nothing); netem's 1000-packet queue
// unless bounded.
func TestNetemArgs(t *testing.T) {
	args := func(d Direction) []string {
		t.Helper()
		a, err := netemArgs(d)
		require.NoError(t, err)
		return a
	}
	require.Equal(t, []string{"netem", "limit", "1000"}, args(Direction{}))
	require.Equal(t, []string{"netem", "delay", "25000us", "limit", "1000"}, args(Direction{Delay: 25 * time.Millisecond}))
	require.Equal(t, []string{"netem", "delay", "12000us", "2000us", "limit", "1000"},
		args(Direction{Delay: 10 * time.Millisecond, Jitter: 4 * time.Millisecond}), "[10, 14) ms: 12 ± 2")
	require.Equal(t, []string{"netem", "delay", "500us", "500us", "limit", "1000"}, args(Direction{Jitter: time.Millisecond}))
	require.Equal(t, []string{"netem", "rate", "10700000bit", "loss", "1.0000%", "limit", "64"},
		args(Direction{Rate: 10.7e6, Loss: 0.01, QueuePackets: 64}))
	require.Equal(t, []string{"netem", "loss", "gemodel", "1.0000%", "30.0000%", "100.0000%", "0.0000%", "limit", "1000"},
		args(Direction{Loss: 0.5, GilbertElliott: &GilbertElliott{P: 0.01, R: 0.3, LossBad: 1}}),
		"the model, not the Bernoulli loss beside it")
	require.Equal(t, []string{"netem", "rate", "1000bit", "limit", "1000"}, args(Direction{Rate: 1000, Queue: "tail"}))

	// What netem cannot emulate is refused, not left out.
	for d, msg := range map[*Direction]string{
		{Trace: "lte-driving"}:                   "no delivery traces (trace lte-driving)",
		{Rate: 1e6, Queue: "fq_codel"}:           "no fq_codel queue",
		{Rate: 1e6, QueueBytes: 30000}:           "queue in packets only",
		{Rate: 1e6, QueueTime: time.Millisecond}: "queue in packets only",
	} {
		_, err := netemArgs(*d)
		require.ErrorContains(t, err, msg)
	}
	p, err := LookupProfile("dsl+bulk")
	require.NoError(t, err)
	_, err = netemProfile(p)
	require.EqualError(t, err, "profile dsl+bulk: the netem backend has no cross traffic: use the userspace backend")
	p.Cross, p.Down.Trace = Cross{}, "lte-walking"
	_, err = netemProfile(p)
	require.ErrorContains(t, err, "profile dsl+bulk: the netem backend has no delivery traces")
	up, err := netemProfile(Profiles["dsl"])
	require.NoError(t, err)
	require.Contains(t, up[0], "800000bit", "up first")
	require.Contains(t, up[1], "10700000bit")
}

package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1000, 0)

func TestStageDelayAndRate(t *testing.T) {
	s := newStage(Direction{Delay: 10 * time.Millisecond, Rate: 8e6}, 1) // 1 byte per µs
	out, ok := s.schedule(t0, 1000)
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Millisecond+10*time.Millisecond), out, "1000 B at 8 Mbit/s = 1 ms, then the delay")
	out2, _ := s.schedule(t0, 1000)
	require.Equal(t, out.Add(time.Millisecond), out2, "the second waits for the first")
	out3, _ := s.schedule(t0.Add(50*time.Millisecond), 500)
	require.Equal(t, t0.Add(50*time.Millisecond+500*time.Microsecond+10*time.Millisecond), out3, "an idle link starts at once")
}

func TestStageQueueLimits(t *testing.T) {
	for _, d := range []Direction{
		{Rate: 8e6, QueuePackets: 5},
		{Rate: 8e6, QueueBytes: 5000},
		{Rate: 8e6, QueueTime: 5 * time.Millisecond},
	} {
		s := newStage(d, 1)
		accepted := 0
		for range 20 {
			if _, ok := s.schedule(t0, 1000); ok {
				accepted++
			}
		}
		require.InDelta(t, 5, accepted, 1, "%+v", d)
		require.EqualValues(t, 20-accepted, s.Dropped)
		// Once the queue drains there is room again.
		_, ok := s.schedule(t0.Add(time.Second), 1000)
		require.True(t, ok)
	}
}

func TestStageJitterNeverReorders(t *testing.T) {
	s := newStage(Direction{Delay: 5 * time.Millisecond, Jitter: 3 * time.Millisecond}, 7)
	var last time.Time
	spread := map[time.Duration]bool{}
	for i := range 10000 {
		in := t0.Add(time.Duration(i) * 100 * time.Microsecond)
		out, ok := s.schedule(in, 100)
		require.True(t, ok)
		require.False(t, out.Before(last), "packet %d reordered", i)
		require.GreaterOrEqual(t, out.Sub(in), 5*time.Millisecond)
		last = out
	}
	// Sparse packets (10 ms apart) show the spread; dense ones cluster near
	// the maximum, since no packet may overtake the one before.
	for i := range 1000 {
		in := t0.Add(time.Hour + time.Duration(i)*10*time.Millisecond)
		out, _ := s.schedule(in, 100)
		spread[out.Sub(in)/time.Millisecond] = true
	}
	require.Len(t, spread, 3, "delays of 5, 6 and 7 ms")
}

func TestStageLoss(t *testing.T) {
	const n = 200000
	s := newStage(Direction{Loss: 0.02}, 3)
	for range n {
		s.schedule(t0, 100)
	}
	require.InDelta(t, 0.02, float64(s.Lost)/n, 4*math.Sqrt(0.02*0.98/n), "Bernoulli loss rate")

	// Gilbert-Elliott: the stationary loss is pi_bad*LossBad + pi_good*LossGood,
	// and losses come in bursts (mean burst 1/R when LossBad = 1).
	g := &GilbertElliott{P: 0.01, R: 0.25, LossGood: 0, LossBad: 1}
	s = newStage(Direction{GilbertElliott: g}, 5)
	lost, bursts, inBurst := 0, 0, false
	for range n {
		_, ok := s.schedule(t0, 100)
		if !ok {
			lost++
			if !inBurst {
				bursts++
			}
		}
		inBurst = !ok
	}
	piBad := g.P / (g.P + g.R)
	require.InDelta(t, piBad, float64(lost)/n, 0.004)
	require.InDelta(t, 1/g.R, float64(lost)/float64(bursts), 0.4, "mean burst length")
}

func TestProfiles(t *testing.T) {
	require.Equal(t, 14800*time.Microsecond, Profiles["fiber"].RTT())
	require.Equal(t, 0.8e6, Profiles["dsl"].Up.Rate)
	for _, n := range ProfileNames() {
		p, err := LookupProfile(n)
		require.NoError(t, err)
		require.NoError(t, p.Validate())
	}
	_, err := LookupProfile("DSL")
	require.NoError(t, err)
	_, err = LookupProfile("5g")
	require.ErrorContains(t, err, "unknown profile")
}

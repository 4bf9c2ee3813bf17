package testbed

import (
	"context"
	"testing"
	"time"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestProfileVariants(t *testing.T) {
	testutil.Timed(t)
	p, err := LookupProfile("4G+loss1")
	require.NoError(t, err)
	require.Equal(t, "4g+loss1", p.Name)
	require.Equal(t, Profiles["4g"].RTT(), p.RTT())
	require.InDelta(t, 0.01, p.Down.Loss, 1e-12)
	require.InDelta(t, 0.01, p.Up.MeanLoss(), 1e-12)

	p, err = LookupProfile("dsl+burst2+fq_codel+bulk2+bulkup")
	require.NoError(t, err)
	require.NotNil(t, p.Down.GilbertElliott)
	require.InDelta(t, 0.02, p.Down.MeanLoss(), 1e-9, "burstN loses N %% in the long run")
	require.InDelta(t, 1.0/3, p.Up.GilbertElliott.R, 1e-12, "bursts of 3 packets on average")
	require.Equal(t, "fq_codel", p.Up.Queue)
	require.Equal(t, Cross{Down: 2, Up: 1}, p.Cross)
	require.Equal(t, Profiles["dsl"].Down.Rate, p.Down.Rate)
	require.Zero(t, Profiles["dsl"].Cross.flows(), "the built-in profile is left alone")

	for bad, why := range map[string]string{
		"5g+loss1":         "not one",
		"4g+loss0":         "above 0",
		"4g+loss100":       "below 100",
		"4g+lossy":         "percentage",
		"4g+bulk17":        "from 1 to 16",
		"4g+bulk9+bulkup9": "flows in all",
		"4g+jitter":        "unknown variant",
		"none+codel":       "needs a rate",
	} {
		_, err := LookupProfile(bad)
		require.ErrorContains(t, err, why, bad)
	}
}

// TestCrossTraffic: a profile's bulk download runs while the host has the
// profile, fills the link, pauses for a check and stops with the next
// profile.
func TestCrossTraffic(t *testing.T) {
	tb := startTB(t, Spec{Name: "tcross"})
	p, err := LookupProfile("dsl+bulk")
	require.NoError(t, err)
	require.NoError(t, tb.SetProfile("client", p))
	c0, ok := tb.Cross("client")
	require.True(t, ok)
	require.Equal(t, 1, c0.DownFlows)
	time.Sleep(3 * time.Second)
	c1, _ := tb.Cross("client")
	mbps := float64(c1.DownBytes) * 8 / time.Since(c1.Since).Seconds() / 1e6
	t.Logf("cross download: %.2f Mbit/s on a 10.7 Mbit/s downlink", mbps)
	require.Greater(t, mbps, 0.7*10.7, "the download fills the link once slow start is over")
	require.Less(t, mbps, 1.02*10.7, "and no more than the link")
	require.Positive(t, tb.Stats().Hosts["client"].CrossDown)

	// The check measures the link alone, then the traffic resumes.
	res, err := tb.Check(context.Background(), p, CheckOptions{Probes: 50, Interval: 2 * time.Millisecond, Throughput: 500 * time.Millisecond})
	require.NoError(t, err)
	require.Less(t, res.ErrP50, testutil.Scaled(time.Millisecond), "no standing queue under the check's probes")
	c2, ok := tb.Cross("client")
	require.True(t, ok, "resumed after the check")
	require.True(t, c2.Since.After(c1.Since))

	require.NoError(t, tb.SetProfile("client", Profiles["dsl"]))
	_, ok = tb.Cross("client")
	require.False(t, ok, "a profile without cross traffic stops it")
}

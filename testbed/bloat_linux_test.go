package testbed

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCoDelUnderABulkDownload: one kernel TCP (cubic) download through the dsl
// profile. With tail drop (1000 packets, 1.1 s at 10.7 Mbit/s) the RTT
// grows by hundreds of milliseconds; with CoDel it stays within tens of
// the idle RTT, CoDel drops, and the download still fills the link;
// FQ-CoDel keeps the probes (a flow of their own) near the idle RTT.
func TestCoDelUnderABulkDownload(t *testing.T) {
	tb := startTB(t, Spec{Name: "bloattest"})
	dsl := Profiles["dsl"]
	codel, err := LookupProfile("../examples/profiles/dsl-codel.yaml")
	require.NoError(t, err)
	fq, err := LookupProfile("../examples/profiles/dsl-fq_codel.yaml")
	require.NoError(t, err)
	ctx := context.Background()
	tail, err := tb.MeasureLoadedRTT(ctx, dsl, 6*time.Second, "cubic")
	require.NoError(t, err)
	withCoDel, err := tb.MeasureLoadedRTT(ctx, codel, 6*time.Second, "cubic")
	require.NoError(t, err)
	withFQ, err := tb.MeasureLoadedRTT(ctx, fq, 6*time.Second, "cubic")
	require.NoError(t, err)
	t.Logf("loaded RTT p50: tail %s, codel %s, fq_codel %s (idle %s); goodput %.1f, %.1f, %.1f Mbit/s", tail.LoadedP50, withCoDel.LoadedP50, withFQ.LoadedP50,
		tail.IdleP50, tail.Goodput/1e6, withCoDel.Goodput/1e6, withFQ.Goodput/1e6)
	base := dsl.RTT()
	require.Greater(t, tail.LoadedP50, base+150*time.Millisecond, "tail drop: the queue stands")
	require.Less(t, withCoDel.LoadedP50, base+40*time.Millisecond, "CoDel: near its 5 ms target")
	require.NotNil(t, withCoDel.Queue)
	require.Positive(t, withCoDel.Queue.Drops)
	// One cubic flow behind CoDel backs off after each drop, and on a busy
	// 2-core runner the netns forwarding costs throughput too (8.2 Mbit/s
	// seen in CI): the claim is that CoDel does not starve the link.
	require.Greater(t, withCoDel.Goodput, 0.6*10.7e6, "CoDel: the download still uses most of the link")
	require.Less(t, withFQ.LoadedP50, base+10*time.Millisecond, "FQ-CoDel: the probes are a sparse flow of their own")
}

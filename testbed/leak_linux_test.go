package testbed

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestProfilesAndChecksLeaveNothingRunning: a long experiment switches
// a host's profile for every cell, with cross traffic and without, and
// checks the link before each; none of it leaves a goroutine or a file
// behind (a bulk flow's writer and reader and its sockets, a check's
// probes and its throughput flows, a stage of the link replaced).
func TestProfilesAndChecksLeaveNothingRunning(t *testing.T) {
	tb := startTB(t, Spec{Name: "tleak"})
	bulk, err := LookupProfile("dsl+bulk")
	require.NoError(t, err)
	ctx := context.Background()
	round := func() {
		for _, p := range []Profile{bulk, Profiles["fiber"]} {
			require.NoError(t, tb.SetProfile("client", p))
			_, err := tb.Check(ctx, p, CheckOptions{Probes: 10, Interval: 2 * time.Millisecond, Throughput: 50 * time.Millisecond})
			require.NoError(t, err, p.Name)
		}
	}
	round()
	files := testutil.OpenFiles(t)
	testutil.NoGrowth(t, 2, round)
	require.Eventually(t, func() bool { return testutil.OpenFiles(t) <= files }, 10*time.Second, 50*time.Millisecond,
		"files open: %d after the first round, %d now", files, testutil.OpenFiles(t))
}

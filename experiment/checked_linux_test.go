package experiment_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

var testResult = store.NewKind("checked-test")

// TestALinkThatFailsItsCheckIsMeasuredAgainOnce: a run whose link fails
// its checks (here every check: a link with jitter) is measured once
// more, not twice; the first stays in
// the store and out of analysis, and a resume continues in the second; a
// run that measures nothing is not measured again.
func TestALinkThatFailsItsCheckIsMeasuredAgainOnce(t *testing.T) {
	testutil.NeedRoot(t, "the testbed")
	tb, err := testbed.Start(testbed.Spec{Name: "tagain"})
	require.NoError(t, err)
	defer tb.Close()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "doxlab.db"))
	require.NoError(t, err)
	defer st.Close()
	var log bytes.Buffer
	env := experiment.Env{Log: &log}
	// Up to 5 ms of jitter each way: the probes' RTT error exceeds the
	// check's 1 ms, and the check stays cheap (a link the emulator cannot
	// carry fails it too, but burns both cores, slowing the tests beside
	// it).
	jittery := testbed.Direction{Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond}
	fast := testbed.Profile{Name: "fast", Down: jittery, Up: jittery}
	var ran []string
	measure := func(runID string) error {
		ran = append(ran, runID)
		return st.WriteResult(ctx, runID, testResult, "1", time.Now(), map[string]string{"run": runID})
	}
	require.NoError(t, env.CheckedRun(ctx, st, experiment.OnTestbed(tb), "x1-fast", "experiment:test", fast, map[string]any{}, measure))
	require.Equal(t, []string{"x1-fast", "x1-fast" + experiment.Again}, ran, "measured again, once")
	require.Contains(t, log.String(), "x1-fast: the link check before it failed (RTT error p99")
	require.Contains(t, log.String(), "measuring it again once, as x1-fast-again")

	again, err := st.Supersessions(ctx, "x1-")
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, "x1-fast-again", again[0].By)
	require.Contains(t, again[0].Why, "the link check after it failed")
	lcs, err := experiment.LoadLinkChecks(ctx, st, experiment.OfExperiment("x1-"))
	require.NoError(t, err)
	require.Len(t, lcs, 2, "the second run's checks only")
	for _, lc := range lcs {
		require.Equal(t, "x1-fast-again", lc.Run)
		require.False(t, lc.OK, "what the second run's checks say stands")
	}
	var results []string
	require.NoError(t, st.FilteredResults(ctx, store.Filter{RunPrefix: "x1-", Superseded: true}, testResult, func(id string, _ []byte) error {
		results = append(results, id)
		return nil
	}))
	require.Equal(t, []string{"x1-fast", "x1-fast-again"}, results, "the first run's results stay in the store")

	// A resume continues in the run that replaced the first.
	ran = nil
	require.NoError(t, env.CheckedRun(ctx, st, experiment.OnTestbed(tb), "x1-fast", "experiment:test", fast, map[string]any{}, func(runID string) error {
		ran = append(ran, runID)
		return nil
	}))
	require.Equal(t, []string{"x1-fast-again"}, ran)

	// A run with nothing left to measure (a finished one resumed) on a
	// link that fails its checks is not measured again, and stores no
	// check: there was nothing for the link to vouch for.
	ran = nil
	require.NoError(t, env.CheckedRun(ctx, st, experiment.OnTestbed(tb), "x2-fast", "experiment:test", fast, map[string]any{}, func(runID string) error {
		ran = append(ran, runID)
		return nil
	}))
	require.Equal(t, []string{"x2-fast"}, ran)
	again, err = st.Supersessions(ctx, "x2-")
	require.NoError(t, err)
	require.Empty(t, again)
	lcs, err = experiment.LoadLinkChecks(ctx, st, experiment.OfExperiment("x2-"))
	require.NoError(t, err)
	require.Empty(t, lcs)
}

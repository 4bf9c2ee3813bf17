package dnsrtt

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/looptest"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: a run on the loopback net, without root, takes the
// experiment's whole path (looptest): every transport and condition
// measured and stored with its run's net, each answered; the link
// checks say they measured nothing; resumed, nothing is measured again.
// No timing is asserted: loopback's are no one's.
func TestRunOnLoopback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dnsrtt.db")
	mk := func(resume string) *DNSRTT {
		return &DNSRTT{Profiles: []string{"none"}, Transports: []string{"udp", "tcp", "dot", "doh2", "doh3", "doq"}, Conditions: []string{"fresh", "0rtt"}, Repeat: 2,
			Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: resume}}
	}
	res, st, id := looptest.Run(t, mk(""))
	n, unit := res.Count()
	// 0-RTT is QUIC's only (crypto/tls sends no early data over TCP):
	// six fresh cells and two 0rtt ones, two lookups each.
	require.Equal(t, 2*(6+2), n, unit)
	sums := res.(*Samples).Summarize()
	require.Len(t, sums, 6+2)
	for _, s := range sums {
		require.Equal(t, "none", s.Profile)
		require.Equal(t, s.N, s.OK, "%s %s: every lookup answered (%v)", s.Transport, s.Condition, s.Failed)
		require.Positive(t, s.Total, "%s %s", s.Transport, s.Condition)
	}
	runs, err := st.Runs(context.Background())
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Contains(t, string(runs[0].Spec), `"net":"loopback"`)
	lcs, err := experiment.LoadLinkChecks(context.Background(), st, experiment.OfExperiment(id))
	require.NoError(t, err)
	require.Len(t, lcs, 2, "before and after")
	for _, lc := range lcs {
		require.True(t, lc.OK)
		require.Equal(t, experiment.NetLoopback, lc.Net, "a check that measured nothing says so")
	}
	looptest.NothingAgain(t, mk(id), st, id, res)
}

// TestLoopbackRefusesWhatNeedsTheTestbed: an emulated profile on the
// loopback net fails with a line that says why, before anything is
// stored as measured.
func TestLoopbackRefusesWhatNeedsTheTestbed(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dnsrtt.db")
	c := &DNSRTT{Profiles: []string{"4g"}, Transports: []string{"udp"}, Conditions: []string{"fresh"}, Repeat: 1,
		Env: experiment.Env{Store: db, Net: experiment.NetLoopback}}
	_, err := c.Run(context.Background())
	require.ErrorIs(t, err, experiment.ErrNeedsTestbed)
	require.ErrorContains(t, err, "profile 4g")
}

// TestRunKeepsItsCells: a run keeps its samples' cells as it ends
// (experiment.KeepCells), before any report read them: the first
// report reads the summary, not the samples, and store seal finds
// nothing left to keep.
func TestRunKeepsItsCells(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "dnsrtt.db")
	c := &DNSRTT{Profiles: []string{"none"}, Transports: []string{"udp", "doq"}, Conditions: []string{"fresh"}, Repeat: 3,
		Env: experiment.Env{Store: db, Net: experiment.NetLoopback}}
	_, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	sums, err := st.Summaries(ctx, summaryKind(measure.DefaultAnswers()))
	require.NoError(t, err)
	held, err := st.RunSamples(ctx)
	require.NoError(t, err)
	require.Len(t, sums, 1, "the run's cells kept as it ended")
	for id, m := range sums {
		require.Equal(t, held[id], m.Samples)
		require.EqualValues(t, 2*3, m.Samples)
	}
	runs, samples, err := experiment.KeepCells(ctx, st, store.Filter{Superseded: true})
	require.NoError(t, err)
	require.Zero(t, runs, "nothing left for store seal to keep")
	require.Zero(t, samples)
}

package dnsrtt

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: a run on the loopback net, without root, takes the
// experiment's whole path: every transport and condition measured and
// stored with its run's net, loaded, summarized, tabled and drawn; the
// link checks say they measured nothing; resumed, nothing is measured
// again. No timing is asserted: loopback's are no one's.
func TestRunOnLoopback(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "dnsrtt.db")
	transports := []string{"udp", "tcp", "dot", "doh2", "doh3", "doq"}
	c := &DNSRTT{Profiles: []string{"none"}, Transports: transports, Conditions: []string{"fresh", "0rtt"}, Repeat: 2,
		Env: experiment.Env{Store: db, Net: experiment.NetLoopback}}
	id, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	res, err := c.Load(ctx, st, id+"-")
	require.NoError(t, err)
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
	var table bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.Contains(t, table.String(), "doq")
	sec, err := res.Section(t.TempDir())
	require.NoError(t, err)
	require.NotEmpty(t, sec.Figures)

	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Contains(t, string(runs[0].Spec), `"net":"loopback"`)
	lcs, err := experiment.LoadLinkChecks(ctx, st, experiment.OfExperiment(id))
	require.NoError(t, err)
	require.Len(t, lcs, 2, "before and after")
	for _, lc := range lcs {
		require.True(t, lc.OK)
		require.Equal(t, experiment.NetLoopback, lc.Net, "a check that measured nothing says so")
	}

	again := &DNSRTT{Profiles: c.Profiles, Transports: transports, Conditions: c.Conditions, Repeat: 2,
		Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: id}}
	_, err = again.Run(ctx)
	require.NoError(t, err)
	res, err = c.Load(ctx, st, id+"-")
	require.NoError(t, err)
	m, _ := res.Count()
	require.Equal(t, n, m, "a finished run resumed measures nothing")
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

package hol

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/looptest"
	"github.com/doxlab/doxlab/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: hol's whole path on the loopback net, without root
// (looptest): both servers (the in-order one too) serve every transport,
// every query is stored once, over one persistent connection, its
// delayed answers held; a finished run resumed measures nothing. That
// the in-order transports block is a timing claim, left to the
// testbed's test.
func TestRunOnLoopback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "hol.db")
	transports := []string{"udp", "tcp-inorder", "dot-inorder", "doh1", "doh2", "doh3", "doq"}
	mk := func(resume string) *HOL {
		return &HOL{Transports: transports, Profiles: []string{"none"}, Queries: 10, Rate: 200, DelayEvery: 5, Delay: 50 * time.Millisecond, Seed: 3,
			Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: resume}}
	}
	res, st, id := looptest.Run(t, mk(""))
	qs := res.(Queries)
	require.Len(t, qs, len(transports)*2*10)
	for _, s := range Summarize(qs) {
		require.Zero(t, s.Failed, s.Transport)
		require.Equal(t, 2, s.DelayedOwn, "%s: every fifth query of the delayed run", s.Transport)
		require.Equal(t, 10, s.Baseline.N, s.Transport)
	}
	for _, q := range qs {
		require.True(t, q.Reused, "%s %s %d: one persistent connection", q.Transport, q.Run, q.Index)
		if q.Delayed {
			require.GreaterOrEqual(t, q.ResolveMs, 50.0, "%s: the server held its answer", q.Transport)
		}
	}
	sec, err := res.Section(t.TempDir())
	require.NoError(t, err)
	require.Len(t, sec.Figures, 1, "one figure for the one profile")
	looptest.NothingAgain(t, mk(id), st, id, res)
}

package hol

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
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: hol's whole path on the loopback net, without root:
// both servers (the in-order one too) serve every transport, every
// query is stored once, over one persistent connection, its delayed
// answers marked; the table, the findings and the figures come from the
// store; a finished run resumed measures nothing. That the in-order
// transports block is a timing claim, left to the testbed's test.
func TestRunOnLoopback(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "hol.db")
	transports := []string{"udp", "tcp-inorder", "dot-inorder", "doh1", "doh2", "doh3", "doq"}
	c := &HOL{Transports: transports, Profiles: []string{"none"}, Queries: 10, Rate: 200, DelayEvery: 5, Delay: 50 * time.Millisecond, Seed: 3,
		Env: experiment.Env{Store: db, Net: experiment.NetLoopback}}
	id, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	res, err := c.Load(ctx, st, id+"-")
	require.NoError(t, err)
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
	var table bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.Contains(t, table.String(), "dot-inorder")
	sec, err := res.Section(t.TempDir())
	require.NoError(t, err)
	require.Len(t, sec.Figures, 1, "one figure for the one profile")

	again := &HOL{Transports: transports, Profiles: c.Profiles, Queries: c.Queries, Rate: c.Rate, DelayEvery: c.DelayEvery, Delay: c.Delay, Seed: c.Seed,
		Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: id}}
	_, err = again.Run(ctx)
	require.NoError(t, err)
	res, err = c.Load(ctx, st, id+"-")
	require.NoError(t, err)
	require.Len(t, res.(Queries), len(qs), "a finished run resumed measures nothing")
}

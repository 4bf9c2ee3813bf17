package amplification

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: amplification's whole path on the loopback net,
// without root: a handshake per cell against the four servers, Retry and
// the NEW_TOKEN token used where the cell says, both flights read from
// the qlog, no stall claimed where there is no round trip to stall for; stored, loaded, tabled and drawn; resumed, nothing
// measured again. Where the limit binds is the testbed's test.
func TestRunOnLoopback(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "amp.db")
	none, err := testbed.LookupProfile("none")
	require.NoError(t, err)
	c := &Amplification{Profile: none, Repeat: 1, Env: experiment.Env{Store: db, Net: experiment.NetLoopback}}
	id, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	res, err := c.Load(ctx, st, id+"-")
	require.NoError(t, err)
	ss := res.(Samples)
	require.Len(t, ss, 2*2*3)
	for _, s := range ss {
		name := s.key()
		require.Equal(t, "ok", s.Status, "%s: %s", name, s.Error)
		require.Equal(t, s.Validation == "retry", s.Retry, name)
		require.Equal(t, s.Validation == "token", s.TokenUsed, name)
		// The qlog was read: how many datagrams went before anything
		// arrived is a race on loopback (the server's ACK, a probe on a
		// busy machine), the testbed's to count.
		require.Positive(t, s.ClientFirstDgrams, name)
		require.Positive(t, s.ServerFlight, name)
		require.False(t, s.Stalled, "%s: no RTT, no stall to claim", name)
		require.Zero(t, s.HandshakeRTTs, "%s: no RTT to count in", name)
		require.Positive(t, s.HandshakeMs, name)
		require.True(t, strings.HasSuffix(s.Qlog, ".sqlog"), name)
	}
	var table bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.Contains(t, table.String(), "large")
	_, err = res.Section(t.TempDir())
	require.NoError(t, err)

	again := &Amplification{Profile: none, Repeat: 1, Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: id}}
	_, err = again.Run(ctx)
	require.NoError(t, err)
	res, err = c.Load(ctx, st, id+"-")
	require.NoError(t, err)
	require.Len(t, res.(Samples), len(ss), "a finished run resumed measures nothing")
}

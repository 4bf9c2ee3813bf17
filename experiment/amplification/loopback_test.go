package amplification

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/looptest"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/testbed"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: amplification's whole path on the loopback net,
// without root (looptest): a handshake per cell against the four
// servers, Retry and the NEW_TOKEN token used where the cell says, both
// flights read from the qlog, no stall claimed where there is no round
// trip to stall for; resumed, nothing measured again. Where the limit
// binds is the testbed's test.
func TestRunOnLoopback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "amp.db")
	none, err := testbed.LookupProfile("none")
	require.NoError(t, err)
	mk := func(resume string) *Amplification {
		return &Amplification{Profile: none, Repeat: 1, Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: resume}}
	}
	res, st, id := looptest.Run(t, mk(""))
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
	looptest.NothingAgain(t, mk(id), st, id, res)
}

package experiment

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/peertest"
	"github.com/doxlab/doxlab/store"
)

// TestAmplificationLimit reproduces the PAM paper's finding in the
// testbed: a chain larger than three times the client's first flight
// makes doxlab's (quic-go's) server stall for the client's ACK, exactly
// at the limit, unless a Retry or a NEW_TOKEN token validated the address.
func TestAmplificationLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		peertest.Missing(t, "the testbed needs root")
	}
	db := filepath.Join(t.TempDir(), "amp.db")
	c := &Amplification{Repeat: 2, Store: db}
	ctx := context.Background()
	id, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	ss, err := LoadAmplification(ctx, st, id)
	require.NoError(t, err)
	require.Len(t, ss, 2*2*3*2)
	for _, s := range ss {
		require.Equal(t, "ok", s.Status, s.key())
		name := s.key()
		require.Equal(t, s.Validation == "retry", s.Retry, name)
		require.Equal(t, s.Validation == "token", s.TokenUsed, name)
		stall := s.Cert == "large" && s.Validation == "none"
		require.Equal(t, stall, s.Stalled, "%s: pause %.1f ms", name, s.LongestPauseMs)
		if stall {
			require.Equal(t, 3*s.ClientFirstFlight, s.ServerFirstBurst, "%s: the server sends exactly three times what it received", name)
			require.Greater(t, s.HandshakeRTTs, 1.8, name)
		}
		if s.Validation == "token" {
			require.Less(t, s.HandshakeRTTs, 1.8, "%s: a token spares both the Retry and the stall", name)
		}
		want := 1
		if s.KeyShare == "pq" {
			want = 2 // X25519MLKEM768 makes the ClientHello span two Initials
		}
		require.Equal(t, want, s.ClientFirstDgrams, name)
		require.True(t, strings.HasSuffix(s.Qlog, ".sqlog"))
	}
}

package verify_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/verify"
)

// TestVerificationsLeaveNothingRunning: verify checks candidates by the
// thousand from one process (every version and ALPN, Retry, tokens,
// 0-RTT, a query); a check that left a QUIC connection or a reader
// behind would pile them up. DoQ, DoT and DoH checks, done, leave the
// process's goroutines where they were.
func TestVerificationsLeaveNothingRunning(t *testing.T) {
	lo := "127.0.0.1:0"
	srv, err := server.New(&server.Config{Listen: server.Listen{DoQ: lo, DoT: lo, DoH: lo}, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	o := verify.Options{Timeout: 2 * time.Second}
	ctx := context.Background()
	round := func() {
		t.Helper()
		r := verify.VerifyDoQ(ctx, srv.Addr("doq").String(), o)
		require.Equal(t, "doq", r.Verdict, r.Error)
		require.Empty(t, verify.VerifyDoT(ctx, srv.Addr("dot").String(), o).Error)
		require.Empty(t, verify.VerifyDoH(ctx, srv.Addr("doh").String(), o).Error)
	}
	testutil.NoGrowth(t, 3, round)
}

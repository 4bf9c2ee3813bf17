package measure_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestTasksLeaveNothingRunning: a campaign worker measures task after
// task for a year, each with its warm-up, its measured query and its
// probe; a task that left a connection or a probe's reader behind
// would pile them up. Every transport under every condition, measured,
// leaves the process's goroutines where they were.
func TestTasksLeaveNothingRunning(t *testing.T) {
	lo := "127.0.0.1:0"
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: lo, TCP: lo, DoT: lo, DoH: lo, DoH3: lo, DoQ: lo}, Answers: server.Answers{Any: "192.0.2.7"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	url := func(name, scheme, path string) string { return scheme + "://" + srv.Addr(name).String() + path }
	s := measure.Spec{
		Targets: []string{url("udp", "udp", ""), url("tcp", "tcp", ""), url("dot", "tls", ""), url("doh", "https", "/dns-query"),
			url("doh3", "h3", "/dns-query"), url("doq", "quic", "")},
		Conditions: []string{"fresh", "pam", "resumed", "0rtt"}, Options: transport.Options{Insecure: true}, Timeout: 3 * time.Second, Concurrency: 2,
	}
	round := func() {
		t.Helper()
		n := 0
		require.NoError(t, measure.Run(context.Background(), s, func(x *measure.Sample) {
			n++
			require.Equal(t, transport.StatusOK, x.Status, "%s %s: %s", x.Transport, x.Condition, x.Error)
		}))
		require.Positive(t, n)
	}
	testutil.NoGrowth(t, 2, round)
}

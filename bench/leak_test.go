package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/transport"
)

// TestRunsLeaveNothingRunning: a benchmark run, open or closed loop,
// lean path or the transports', leaves the process's goroutines where
// they were when it returns: the server-load experiment runs one a
// step, a ramp dozens.
func TestRunsLeaveNothingRunning(t *testing.T) {
	urls, roots := everyTransport(t)
	round := func() {
		t.Helper()
		for _, url := range urls {
			for _, c := range []bench.Config{
				{Rate: 500, Duration: 60 * time.Millisecond, Conns: 2, Options: transport.Options{Reuse: true}}, // the lean path
				{Rate: 500, Duration: 60 * time.Millisecond, Full: true, Options: transport.Options{Reuse: true}},
				{Workers: 2, MaxQueries: 20, Duration: time.Second}, // closed loop
			} {
				c.URL, c.Options.RootCAs, c.Options.Timeout = url, roots, 5*time.Second
				res, err := bench.Run(context.Background(), c)
				require.NoError(t, err, url)
				s := res.Summarize()
				require.Equal(t, s.Sent, s.Answered, "%s: %v", url, s.Errors)
			}
		}
	}
	testutil.NoGrowth(t, 2, round)
}

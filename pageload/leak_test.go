package pageload_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestLoadsLeaveNothingRunning: a campaign worker's loader loads page
// after page for as long as the campaign runs; a load that left a
// connection, a reader or a timer behind would pile them up. Loads over
// HTTP/3 (cold and in 0-RTT) and HTTP/2, done, leave the process's
// goroutines where they were.
func TestLoadsLeaveNothingRunning(t *testing.T) {
	srv, g := site(t)
	round := func() {
		t.Helper()
		for _, c := range []struct {
			proto string
			zero  bool
		}{{"h3", false}, {"h3", true}, {"h2", false}} {
			l := loader(t, srv, c.proto, c.zero)
			for range 2 {
				r := l.Load(context.Background(), g)
				require.Equal(t, "ok", r.Status, "%s: %s", c.proto, r.Error)
			}
		}
	}
	testutil.NoGrowth(t, 3, round)
}

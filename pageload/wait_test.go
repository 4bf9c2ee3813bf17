package pageload

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWaitUntil never ends a wait before it is due, whether the timer,
// the thread's own sleep or both cover it, and gives up when the context
// ends.
func TestWaitUntil(t *testing.T) {
	for _, d := range []time.Duration{0, 300 * time.Microsecond, 1500 * time.Microsecond, 5 * time.Millisecond} {
		due := time.Now().Add(d)
		require.True(t, waitUntil(context.Background(), due))
		require.False(t, time.Now().Before(due), "a %v wait ended early", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	require.False(t, waitUntil(ctx, time.Now().Add(time.Hour)))
}

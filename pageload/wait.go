package pageload

import (
	"context"
	"time"
)

// finePart is how much of a wait the OS thread sleeps through itself.
const finePart = 2 * time.Millisecond

// waitUntil blocks until due, or until ctx ends; it reports whether due
// was reached. A replay's gaps are the browser's time, a millisecond or
// two each on fiber, and Go's timers end late by about that: the
// runtime's poller sleeps in whole milliseconds (timers of 0.1-7 ms
// ended 0.6-1.0 ms late on average here, nanosleep 60-100 µs). So a
// timer covers all but the last finePart, and nanosleep the rest.
func waitUntil(ctx context.Context, due time.Time) bool {
	if coarse := time.Until(due) - finePart; coarse > 0 {
		t := time.NewTimer(coarse)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	if ctx.Err() != nil {
		return false
	}
	sleepUntil(due)
	return true
}

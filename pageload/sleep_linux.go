package pageload

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// sleepUntil sleeps until due with nanosleep(2) on this thread: Go's
// timers fire a millisecond late, which a replayed gap would inherit.
func sleepUntil(due time.Time) {
	for {
		d := time.Until(due)
		if d <= 0 {
			return
		}
		ts := unix.NsecToTimespec(int64(d))
		if err := unix.Nanosleep(&ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return // cannot sleep: go on now rather than spin
		}
	}
}

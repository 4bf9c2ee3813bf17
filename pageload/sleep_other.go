//go:build !linux

package pageload

import "time"

// sleepUntil sleeps until due on Go's timer, which may fire a
// millisecond late (Linux sleeps with nanosleep instead).
func sleepUntil(due time.Time) { time.Sleep(time.Until(due)) }

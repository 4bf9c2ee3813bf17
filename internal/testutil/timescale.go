package testutil

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Timescale is what a test's upper bounds on time are multiplied by:
// DOXLAB_TIMESCALE, 1 when unset, as quic-go's TIMESCALE_FACTOR. A
// slower machine sets it rather than a test loosening its own bound.
// Lower bounds (a link's delay, a deadline held) are physics and stay.
func Timescale() float64 {
	if f, err := strconv.ParseFloat(os.Getenv("DOXLAB_TIMESCALE"), 64); err == nil && f > 0 {
		return f
	}
	return 1
}

// Scaled is d times the Timescale, for a test's upper bound on time.
func Scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * Timescale()) }

// ScaledMs is ms times the Timescale, for an upper bound in ms.
func ScaledMs(ms float64) float64 { return ms * Timescale() }

// Timed marks a test whose verdict depends on time without an upper
// bound of its own to scale (a threshold of the code under test, an AQM
// holding its target, probes timed in a testbed): scripts/hog-check.sh
// runs it, with every test that calls Scaled or ScaledMs, beside CPU
// hogs (internal/testutil/timedtests finds them).
func Timed(t testing.TB) { t.Helper() }

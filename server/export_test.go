package server

import "time"

// LagRecords holds every conn record back by d until the test ends.
func LagRecords(d time.Duration) (restore func()) {
	recordLag.Store(int64(d))
	return func() { recordLag.Store(0) }
}

// ClosedClean is closedClean, for its table test.
var ClosedClean = closedClean

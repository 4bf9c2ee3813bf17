//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTimes is this process's user and system CPU time so far.
func cpuTimes() cpu {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpu{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

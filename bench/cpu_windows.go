package bench

import (
	"syscall"
	"time"
)

// cpuTimes is this process's user and system CPU time so far
// (GetProcessTimes, in 100-ns units).
func cpuTimes() cpu {
	var created, exited, kernel, user syscall.Filetime
	h, err := syscall.GetCurrentProcess()
	if err != nil || syscall.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return cpu{}
	}
	ticks := func(f syscall.Filetime) time.Duration {
		return time.Duration(int64(f.HighDateTime)<<32|int64(f.LowDateTime)) * 100
	}
	return cpu{ticks(user), ticks(kernel)}
}

package testbed

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// idleSpinners keep every CPU busy at the lowest priority there is
// (SCHED_IDLE), so that no vCPU halts while the testbed runs: on a VM a
// halted vCPU takes tens of µs to wake, and runs the kernel's network
// path slowly for a while after. They take only time nothing else wants.
// A plain loop, not the kernel's polling idle: that one spins on PAUSE,
// which a hypervisor may take for a lock spin and deschedule.
type idleSpinners struct {
	stop atomic.Bool
	wg   sync.WaitGroup
}

func startIdleSpinners() *idleSpinners {
	s := &idleSpinners{}
	for cpu := range runtime.NumCPU() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			runtime.LockOSThread() // the thread ends with the goroutine
			var set unix.CPUSet
			set.Set(cpu)
			unix.SchedSetaffinity(0, &set)
			if unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0) != nil {
				return // at any other priority it would compete with real work
			}
			for !s.stop.Load() {
			}
		}()
	}
	return s
}

func (s *idleSpinners) close() {
	if s != nil {
		s.stop.Store(true)
		s.wg.Wait()
	}
}

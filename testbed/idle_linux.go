package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// idleSpinners keep every CPU busy at the lowest priority there is
// (SCHED_IDLE), so that no vCPU halts while the testbed runs: on a VM a
// halted vCPU takes tens of µs to wake, and runs the kernel's network
// path slowly for a while after. They take only time nothing else wants.
// A plain loop, not the kernel's polling idle: that one spins on PAUSE,
// which a hypervisor may take for a lock spin and deschedule.
//
// Each is a child process, not a goroutine: a SCHED_IDLE thread that held
// one of Go's Ps would starve every goroutine waiting for that P whenever
// the machine is busy (it runs only when nothing else wants the CPU, and
// so answers the scheduler's preemption late), stalling the emulator.
type idleSpinners struct {
	procs []*exec.Cmd
}

func startIdleSpinners() (*idleSpinners, error) {
	s := &idleSpinners{}
	for cpu := range runtime.NumCPU() {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives us
		if err := cmd.Start(); err != nil {
			s.close()
			return nil, fmt.Errorf("starting an idle spinner: %w", err)
		}
		s.procs = append(s.procs, cmd)
		pid := cmd.Process.Pid
		var set unix.CPUSet
		set.Set(cpu)
		err := unix.SchedSetaffinity(pid, &set)
		if err == nil {
			err = unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
		}
		if err != nil {
			// At any other priority it would compete with real work.
			s.close()
			return nil, fmt.Errorf("making a spinner idle: %w", err)
		}
	}
	return s, nil
}

// pids are the spinners' process IDs.
func (s *idleSpinners) pids() []int {
	var out []int
	for _, c := range s.procs {
		out = append(out, c.Process.Pid)
	}
	return out
}

func (s *idleSpinners) close() {
	if s == nil {
		return
	}
	for _, c := range s.procs {
		c.Process.Signal(os.Kill)
		c.Wait()
	}
	s.procs = nil
}

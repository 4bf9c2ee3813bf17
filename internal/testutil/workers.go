package testutil

import (
	"bytes"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Workers supervises a test's campaign worker processes as systemd or
// Kubernetes would: each started under a name (its vantage point, or
// its worker ID where a test restarts it under that), killed with
// SIGKILL when the test says (not a failure), replaced by the test, and
// waited for. A worker that fails otherwise fails the test with what it
// said.
type Workers struct {
	t    testing.TB
	mu   sync.Mutex
	wg   sync.WaitGroup
	live map[*exec.Cmd]string // by name
}

// NewWorkers supervises workers for t.
func NewWorkers(t testing.TB) *Workers { return &Workers{t: t, live: map[*exec.Cmd]string{}} }

// Start starts cmd, a worker named v.
func (w *Workers) Start(v string, cmd *exec.Cmd) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("starting a worker of %s: %v", v, err)
	}
	w.mu.Lock()
	w.live[cmd] = v
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := cmd.Wait()
		killed := cmd.ProcessState != nil && cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if err != nil && !killed {
			w.t.Errorf("worker of %s: %v: %s", v, err, stderr.String())
		}
		w.mu.Lock()
		delete(w.live, cmd)
		w.mu.Unlock()
	}()
}

// Kill kills one running worker with SIGKILL: pick chooses among them
// (in process ID order; nil: the first), or the one named v when v is
// not empty. It returns the killed worker's name and process ID; ok is
// false when none runs.
func (w *Workers) Kill(v string, pick func(n int) int) (name string, pid int, ok bool) {
	w.mu.Lock()
	var live []*exec.Cmd
	for c, cv := range w.live {
		if v == "" || cv == v {
			live = append(live, c)
		}
	}
	w.mu.Unlock()
	if len(live) == 0 {
		return "", 0, false
	}
	slices.SortFunc(live, func(a, b *exec.Cmd) int { return a.Process.Pid - b.Process.Pid })
	i := 0
	if pick != nil {
		i = pick(len(live))
	}
	victim := live[i]
	w.mu.Lock()
	name = w.live[victim]
	w.mu.Unlock()
	victim.Process.Kill()
	return name, victim.Process.Pid, true
}

// Wait waits for every worker to end, at most d; false if some did not.
func (w *Workers) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

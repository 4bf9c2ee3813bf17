package testutil

import (
	"bytes"
	"os"
	"runtime"
	"testing"
	"time"
)

// NoGrowth runs round once, counts the process's goroutines, runs it
// rounds times more and fails, with every goroutine's stack, unless
// the count comes back within 10 s: what a long-lived process (a
// campaign worker, a server) does once per task must leave nothing
// running. The count before is the most seen over 200 ms, as timers
// and pollers come and go. Goroutines are counted in the dump of their
// stacks, which leaves the runtime's own out (NumGoroutine counts the
// finalizer's while it runs one), less doxlab's server's idle workers:
// a pool sized by the load, each leaving after 10 s idle, whose count a
// round changes without anything being left behind.
func NoGrowth(t testing.TB, rounds int, round func()) {
	t.Helper()
	round()
	before := 0
	for range 5 {
		n, _ := goroutines()
		before = max(before, n)
		time.Sleep(40 * time.Millisecond)
	}
	for range rounds {
		round()
	}
	var after int
	var stacks []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if after, stacks = goroutines(); after <= before {
			return
		}
	}
	t.Fatalf("%d goroutines after %d more rounds, %d after the first:\n%s", after, rounds, before, stacks)
}

// goroutines are the goroutines runtime.Stack shows but the server's
// pool's, and their stacks.
func goroutines() (int, []byte) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			count := 0
			for g := range bytes.SplitSeq(buf[:n], []byte("\n\n")) {
				if !bytes.Contains(g, []byte("doxlab/server.(*workers).loop")) {
					count++
				}
			}
			return count, buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// OpenFiles is how many files this process holds open; the test skips
// where /proc/self/fd is not.
func OpenFiles(t testing.TB) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	return len(fds)
}

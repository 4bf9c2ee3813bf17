//go:build unix

package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// claims are the lock files of the ports this process claimed, held open
// (a lock ends with its file's close, which the garbage collector would
// do) until the process exits.
var (
	claimsMu sync.Mutex
	claims   []*os.File
)

// claimPort takes port among the test binaries go test runs at once: an
// flock on a file named for it in a directory they share, which the
// kernel drops when the process exits, however it exits. A port another
// binary claimed is refused, even where its server has not bound it yet
// (a peer process starting: aioquic's DoQ server took a second in CI,
// and another binary's probe found the port free meanwhile). Where the
// directory cannot be used, every port is claimable, as before.
func claimPort(port int) bool {
	dir := filepath.Join(os.TempDir(), "doxlab-test-ports")
	if err := os.Mkdir(dir, 0o777); err == nil {
		os.Chmod(dir, 0o1777) // for every user's tests, as /tmp is; the umask took the bits
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	claimsMu.Lock()
	claims = append(claims, f)
	claimsMu.Unlock()
	return true
}

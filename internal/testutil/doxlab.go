package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var doxlab struct {
	once sync.Once
	path string
	err  error
}

// Doxlab builds the doxlab binary from this module, once per test
// binary, for the tests that run it as a process of its own. A package
// that calls it removes the binary with Main (65 MB a run otherwise
// piles up in the temporary directory).
func Doxlab(t testing.TB) string {
	t.Helper()
	doxlab.once.Do(func() {
		mod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			doxlab.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "doxlab-bin")
		if err != nil {
			doxlab.err = err
			return
		}
		doxlab.path = filepath.Join(dir, "doxlab")
		// -trimpath, as the lanes build (the Makefile's TRIM): Go's
		// build cache keys a package compiled without it by its
		// directory, so in a new checkout (a CI's clone) this build
		// compiled all of doxlab again, where the lanes had compiled
		// it already.
		cmd := exec.Command("go", "build", "-trimpath", "-o", doxlab.path, "./cmd/doxlab")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
		if out, err := cmd.CombinedOutput(); err != nil {
			doxlab.err = fmt.Errorf("building doxlab: %w: %s", err, out)
		}
	})
	if doxlab.err != nil {
		t.Fatal(doxlab.err)
	}
	return doxlab.path
}

// Main runs a package's tests, with a cache of their own, and removes
// the binary Doxlab built: a package whose tests call Doxlab or read a
// dataset calls it from its TestMain.
func Main(m *testing.M) {
	// What doxlab keeps in the user's cache (a dataset's summaries) goes
	// to the tests' own, and the doxlab they run inherits it.
	cache, err := os.MkdirTemp("", "doxlab-cache-")
	if err == nil {
		os.Setenv("DOXLAB_CACHE", cache)
	}
	code := m.Run()
	if doxlab.path != "" {
		os.RemoveAll(filepath.Dir(doxlab.path))
	}
	if err == nil {
		os.RemoveAll(cache)
	}
	os.Exit(code)
}

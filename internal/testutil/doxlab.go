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
	once   sync.Once
	path   string
	shared bool // in BinDirEnv's directory: not this binary's to remove
	err    error
}

// BinDirEnv names a directory the test binaries of one 'make test' share
// their doxlab in: the first to need it builds it, the others run that
// one. Each build links 77 MB (4 s of CPU, 48 s on this machine's disk
// when the build cache had been paged out), and six test binaries of the
// lanes (cli, web and campaign in unit, cli and web in timed, e2e) each
// built their own.
const BinDirEnv = "DOXLAB_TEST_BIN_DIR"

// Doxlab builds the doxlab binary from this module, once per test
// binary (or once per BinDirEnv's directory), for the tests that run it
// as a process of its own. A package that calls it removes the binary
// with Main (65 MB a run otherwise piles up in the temporary directory).
func Doxlab(t testing.TB) string {
	t.Helper()
	doxlab.once.Do(func() {
		dir := os.Getenv(BinDirEnv)
		doxlab.shared = dir != ""
		if !doxlab.shared {
			if dir, doxlab.err = os.MkdirTemp("", "doxlab-bin"); doxlab.err != nil {
				return
			}
		}
		doxlab.path = filepath.Join(dir, "doxlab")
		if _, err := os.Stat(doxlab.path); err == nil { // another test binary built it
			return
		}
		doxlab.err = buildDoxlab(doxlab.path)
	})
	if doxlab.err != nil {
		t.Fatal(doxlab.err)
	}
	return doxlab.path
}

// buildDoxlab builds ./cmd/doxlab of this module to dst: beside it, then
// renamed into place, so another test binary sharing dst runs either
// none or the whole (two building at once both rename the same program).
func buildDoxlab(dst string) error {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// -trimpath, as the lanes build (the Makefile's TRIM): Go's build
	// cache keys a package compiled without it by its directory, so in a
	// new checkout (a CI's clone) this build compiled all of doxlab
	// again, where the lanes had compiled it already.
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(tmp, "doxlab"), "./cmd/doxlab")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building doxlab: %w: %s", err, out)
	}
	return os.Rename(filepath.Join(tmp, "doxlab"), dst)
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
	if doxlab.path != "" && !doxlab.shared {
		os.RemoveAll(filepath.Dir(doxlab.path))
	}
	if err == nil {
		os.RemoveAll(cache)
	}
	os.Exit(code)
}

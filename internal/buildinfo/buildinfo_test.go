package buildinfo

import (
	"regexp"
	"testing"
)

// TestVersionNamesACommit: tests run without VCS stamping, so the commit
// comes from the source tree, as it does for a plain 'go build' under
// GOFLAGS=-buildvcs=false.
func TestVersionNamesACommit(t *testing.T) {
	if !regexp.MustCompile(`[0-9a-f]{12}`).MatchString(Version()) {
		t.Fatalf("no commit in %q", Version())
	}
}

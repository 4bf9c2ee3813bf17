package buildinfo

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
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

// TestCurrentIsTheChangelogsNewest: Current, the newest release in
// CHANGELOG.md and CITATION.cff's version are the same, so a release
// cannot name itself one thing in the binary and another in the docs.
func TestCurrentIsTheChangelogsNewest(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[([0-9]+\.[0-9]+\.[0-9]+)\]`).FindSubmatch(b)
	if m == nil || "v"+string(m[1]) != Current {
		t.Fatalf("CHANGELOG.md's newest release is %q, Current %q", m, Current)
	}
	c, err := os.ReadFile("../../CITATION.cff")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^version: ` + regexp.QuoteMeta(Current[1:]) + `$`).Match(c) {
		t.Fatalf("CITATION.cff's version is not %s", Current[1:])
	}
}

// TestDevelopmentBuildSaysSo: a test binary is no release.
func TestDevelopmentBuildSaysSo(t *testing.T) {
	if Release() != "" {
		t.Fatalf("a test binary claims release %q", Release())
	}
	d := Describe()
	if !strings.HasPrefix(d, "doxlab "+Current+"+dev ") || !strings.Contains(d, "a development build, not a release") {
		t.Fatalf("Describe() = %q", d)
	}
	for v, want := range map[string]bool{"v0.1.0": true, "v1.20.3": true, "v0.1.1-0.20261128041546-ff68e3eec1fc": false, "v0.1.0+dirty": false, "(devel)": false, "v0.2.0-rc.1": false} {
		if isRelease(v) != want {
			t.Errorf("isRelease(%q) = %v", v, !want)
		}
	}
}

// BinaryID is what `go tool buildid` reads of the running binary.
func TestBinaryIDIsGos(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	if got, want := BinaryID(), strings.TrimSpace(string(out)); got == "" || got != want {
		t.Errorf("BinaryID %q, go tool buildid %q", got, want)
	}
}

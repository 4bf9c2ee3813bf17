package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestSourceRevisionReadsGit: the commit a build without VCS stamping
// names is git's own, read from a repository git made: a branch's loose
// ref, the same once packed, a detached HEAD, and a linked worktree
// (whose .git is a file naming its git directory, and whose branch
// lives in the repository it shares).
func TestSourceRevisionReadsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	dir := t.TempDir()
	repo, wt := filepath.Join(dir, "repo"), filepath.Join(dir, "wt")
	git := func(in string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", in, "-c", "user.name=t", "-c", "user.email=t@example.test", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	revision := func(work string) string {
		t.Helper()
		g, ok := gitDir(filepath.Join(work, ".git"))
		if !ok {
			t.Fatalf("no git directory in %s", work)
		}
		head, err := os.ReadFile(filepath.Join(g, "HEAD"))
		if err != nil {
			t.Fatal(err)
		}
		return resolveRef(g, strings.TrimSpace(string(head)))
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(repo, "init", "-q", "-b", "main")
	git(repo, "commit", "-q", "--allow-empty", "-m", "one")
	first := git(repo, "rev-parse", "--short=12", "HEAD")
	for name, got := range map[string]func() string{
		"loose": func() string { return revision(repo) },
		"packed": func() string {
			git(repo, "pack-refs", "--all", "--prune")
			if _, err := os.Stat(filepath.Join(repo, ".git", "refs", "heads", "main")); err == nil {
				t.Fatal("git left the ref loose")
			}
			return revision(repo)
		},
	} {
		if r := got(); r != first {
			t.Errorf("%s: %q, git says %q", name, r, first)
		}
	}

	git(repo, "worktree", "add", "-q", "-b", "side", wt)
	git(wt, "commit", "-q", "--allow-empty", "-m", "two")
	second := git(wt, "rev-parse", "--short=12", "HEAD")
	if r := revision(wt); r != second || second == first {
		t.Errorf("worktree: %q, git says %q (the repository's %q)", r, second, first)
	}
	if r := revision(repo); r != first {
		t.Errorf("the repository beside its worktree: %q, git says %q", r, first)
	}
	git(repo, "checkout", "-q", "--detach", "HEAD")
	if r := revision(repo); r != first {
		t.Errorf("detached: %q, git says %q", r, first)
	}
	if r := resolveRef(filepath.Join(repo, ".git"), "ref: refs/heads/none"); r != "" {
		t.Errorf("a branch that is not: %q", r)
	}
	if _, ok := gitDir(filepath.Join(dir, ".git")); ok {
		t.Error("a directory without .git has a git directory")
	}
}

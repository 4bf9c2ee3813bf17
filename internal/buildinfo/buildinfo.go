// Package buildinfo says which doxlab is running: module version and VCS
// revision, as Go recorded them at build time. Records and runs carry it.
package buildinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Current is the release this source tree is, or leads to: the newest
// version in CHANGELOG.md (a test keeps them equal). A binary is that
// release only when it was built as one (Release); any other build is a
// development build after it.
const Current = "v0.1.0"

// release is set by a release build: -ldflags "-X
// github.com/doxlab/doxlab/internal/buildinfo.release=v0.1.0" (make
// release, from the git tag).
var release string

// Release is the release this binary is ("v0.1.0"), or "" for a
// development build: one built with the release's -ldflags, or installed
// by 'go install github.com/doxlab/doxlab/cmd/doxlab@v0.1.0', whose
// module version Go records.
func Release() string {
	if release != "" {
		return release
	}
	if bi, ok := debug.ReadBuildInfo(); ok && isRelease(bi.Main.Version) {
		return bi.Main.Version
	}
	return ""
}

// isRelease says whether v is a plain semantic version: not "(devel)",
// not a pre-release, not a pseudo-version (v0.1.1-0.20261128...), not
// a modified tree's (+dirty).
var releaseRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

func isRelease(v string) bool { return releaseRE.MatchString(v) }

// Version is "VERSION REVISION[+dirty]": the release, or for a
// development build Current+dev (semver build metadata: v0.1.0 and
// what came after it), what every run and record carries.
func Version() string {
	v, rev, dirty := Current+"+dev", "", false
	if r := Release(); r != "" {
		v = r
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		// Built without VCS stamping (GOFLAGS=-buildvcs=false, as on some
		// machines): read the commit from the source tree the binary was
		// built from, if it is still there, and say so.
		if r := sourceRevision(); r != "" {
			rev = r + " (source tree)"
		}
	}
	if len(rev) > 12 && !strings.HasSuffix(rev, ")") {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev
	}
	if dirty && !strings.HasSuffix(v, "+dirty") {
		v += "+dirty"
	}
	return v
}

// sourceRevision is the commit checked out in the git work tree that
// holds this file's source, or "".
func sourceRevision() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) { // -trimpath
		return ""
	}
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if git, ok := gitDir(filepath.Join(dir, ".git")); ok {
			head, err := os.ReadFile(filepath.Join(git, "HEAD"))
			if err != nil {
				return ""
			}
			return resolveRef(git, strings.TrimSpace(string(head)))
		}
		if dir == filepath.Dir(dir) {
			return ""
		}
	}
}

// gitDir is the git directory at path: path itself, or the one a .git
// file names ("gitdir: DIR"), as a linked worktree's or a submodule's
// does.
func gitDir(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	if fi.IsDir() {
		return path, true
	}
	b, err := os.ReadFile(path)
	d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if err != nil || !ok {
		return "", false
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(filepath.Dir(path), d)
	}
	return d, true
}

// resolveRef follows HEAD to a commit: a loose ref or packed-refs, in
// the git directory or, for a linked worktree, the one it shares its
// branches with (its "commondir").
func resolveRef(git, head string) string {
	ref, ok := strings.CutPrefix(head, "ref: ")
	if !ok {
		return short(head)
	}
	common := git
	if b, err := os.ReadFile(filepath.Join(git, "commondir")); err == nil {
		if common = strings.TrimSpace(string(b)); !filepath.IsAbs(common) {
			common = filepath.Join(git, common)
		}
	}
	for _, dir := range []string{git, common} {
		if b, err := os.ReadFile(filepath.Join(dir, ref)); err == nil {
			return short(strings.TrimSpace(string(b)))
		}
	}
	packed, _ := os.ReadFile(filepath.Join(common, "packed-refs"))
	for line := range strings.SplitSeq(string(packed), "\n") {
		if h, r, ok := strings.Cut(line, " "); ok && r == ref {
			return short(h)
		}
	}
	return ""
}

func short(rev string) string { return rev[:min(12, len(rev))] }

// Describe is what doxlab version prints: the version, whether it is a
// release, the commit, the Go toolchain and the platform.
func Describe() string {
	v := Version()
	rel, rest, _ := strings.Cut(v, " ")
	kind := "a development build, not a release: cite a release"
	if Release() != "" {
		kind = "release"
	}
	if rest == "" {
		rest = "commit unknown"
	} else {
		rest = "commit " + rest
	}
	return fmt.Sprintf("doxlab %s (%s; %s; %s %s/%s)", rel, kind, rest, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

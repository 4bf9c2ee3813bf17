// Package buildinfo says which doxlab is running: module version and VCS
// revision, as Go recorded them at build time. Records and runs carry it.
package buildinfo

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is "VERSION REVISION[+dirty]", or "devel" when Go recorded none.
func Version() string {
	v, rev, dirty := "devel", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
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
	// Go 1.24+ already builds a pseudo-version from the revision.
	if rev != "" && !strings.Contains(v, rev) {
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
		git := filepath.Join(dir, ".git")
		if head, err := os.ReadFile(filepath.Join(git, "HEAD")); err == nil {
			return resolveRef(git, strings.TrimSpace(string(head)))
		}
		if dir == filepath.Dir(dir) {
			return ""
		}
	}
}

// resolveRef follows HEAD to a commit: a loose ref or packed-refs.
func resolveRef(git, head string) string {
	ref, ok := strings.CutPrefix(head, "ref: ")
	if !ok {
		return short(head)
	}
	if b, err := os.ReadFile(filepath.Join(git, ref)); err == nil {
		return short(strings.TrimSpace(string(b)))
	}
	packed, _ := os.ReadFile(filepath.Join(git, "packed-refs"))
	for line := range strings.SplitSeq(string(packed), "\n") {
		if h, r, ok := strings.Cut(line, " "); ok && r == ref {
			return short(h)
		}
	}
	return ""
}

func short(rev string) string { return rev[:min(12, len(rev))] }

// Package buildinfo says which doxlab is running: module version and VCS
// revision, as Go recorded them at build time. Records and runs carry it.
package buildinfo

import (
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
	if len(rev) > 12 {
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

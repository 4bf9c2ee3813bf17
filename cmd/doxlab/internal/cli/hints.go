package cli

import (
	"strings"

	"github.com/doxlab/doxlab/store"
)

// hint is a doxlab command line printed for the user to paste: each
// argument quoted for a POSIX shell where it needs it. Every hint doxlab
// prints is made here, and TestPrintedHintsWork runs them.
func hint(args ...string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$&;|<>*?()[]{}`\\!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return "doxlab " + strings.Join(quoted, " ")
}

// reportHint is the command that reports run id of the store at dsn
// (its password redacted: the user has it).
func reportHint(dsn, id string) string {
	return hint("report", "--store", store.Redact(dsn), "--run", id)
}

// continueHint is the command args (after "doxlab") that continues run
// id: args with --run id instead of any earlier --run or --new.
func continueHint(args []string, id string) string {
	var kept []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--run" || a == "-run":
			i++ // and its value
			continue
		case strings.HasPrefix(a, "--run=") || strings.HasPrefix(a, "-run=") || a == "--new" || a == "-new":
			continue
		}
		kept = append(kept, a)
	}
	return hint(append(kept, "--run", id)...)
}

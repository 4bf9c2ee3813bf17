package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

const storeUsage = `usage: doxlab store stats [--store DSN] [--json]

stats: what the store holds and what it costs on disk: rows and octets
per table (indexes included), the DNS samples' octets each, and each
result kind's rows and raw JSON (docs/store.md).
`

func runStore(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stderr, storeUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] != "stats" {
		fmt.Fprintf(stderr, "doxlab store: unknown command %q\n%s", args[0], storeUsage)
		return exitUsage
	}
	fs := newFlagSet("store stats", stderr)
	dsn := fs.String("store", "doxlab.db", "the store: a SQLite file or a postgres:// URL")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, code, ok := parseArgs(fs, args[1:]); !ok {
		return code
	}
	ctx := context.Background()
	st, code := openExistingStore(ctx, *dsn, "store stats", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	stats, err := st.Stats(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab store stats: %v\n", err)
		return 1
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(stats)
		return exitOK
	}
	if err := stats.Write(stdout); err != nil {
		return 1
	}
	return exitOK
}

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/doxlab/doxlab/store"
)

// runExport writes a store's samples as CSV or Parquet for pandas, DuckDB
// or R.
func runExport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("store", "doxlab.db", "the store: a SQLite file or postgres:// URL")
	runID := fs.String("run", "", "only this run (default: all)")
	format := fs.String("format", "csv", "csv or parquet")
	outPath := fs.String("out", "", "write to `FILE` (default: standard output; required for parquet)")
	list := fs.Bool("runs", false, "list the runs instead")
	if _, err := parseInterleaved(fs, args); err != nil {
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab export: "+format+"\n", a...)
		return code
	}
	if *format != "csv" && *format != "parquet" {
		return fail(exitUsage, "unknown format %q (want csv or parquet)", *format)
	}
	if *format == "parquet" && *outPath == "" {
		return fail(exitUsage, "parquet needs --out FILE")
	}
	ctx := context.Background()
	st, code := openExistingStore(ctx, *dsn, "export", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	if *list {
		runs, err := st.Runs(ctx)
		if err != nil {
			return fail(1, "%v", err)
		}
		for _, r := range runs {
			fmt.Fprintf(stdout, "%s  %-22s %s  profile %-9s %s on %s (%s)\n", r.ID, r.Kind, r.StartedAt.Format("2006-01-02 15:04:05"), orDash(r.Profile), r.DoxlabVersion, r.Hostname, r.Kernel)
		}
		return exitOK
	}
	rows, err := st.Rows(ctx, *runID)
	if err != nil {
		return fail(1, "%v", err)
	}
	w := stdout
	if *outPath != "" {
		f, err := os.Create(*outPath)
		if err != nil {
			return fail(1, "%v", err)
		}
		defer f.Close()
		w = f
	}
	if *format == "parquet" {
		err = store.WriteParquet(w, rows)
	} else {
		err = store.WriteCSV(w, rows)
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if *outPath != "" {
		fmt.Fprintf(stderr, "doxlab export: %d samples to %s\n", len(rows), *outPath)
	}
	return exitOK
}

func isURL(s string) bool {
	for _, p := range []string{"postgres://", "postgresql://", "sqlite://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// openExistingStore opens a store that must already exist (export,
// report): a missing SQLite file is a usage error, not a new empty store.
func openExistingStore(ctx context.Context, dsn, cmd string, stderr io.Writer) (*store.Store, int) {
	if _, err := os.Stat(dsn); err != nil && !isURL(dsn) {
		fmt.Fprintf(stderr, "doxlab %s: no store at %s\n", cmd, dsn)
		return nil, exitUsage
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab %s: %v\n", cmd, err)
		return nil, 1
	}
	return st, exitOK
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

const storeUsage = `usage: doxlab store stats [--store DSN] [--json]
       doxlab store archive --before DATE --dataset DIR [--store DSN]
       doxlab store brief [--store DSN]
       doxlab store seal [--store DSN] [--again]

stats: what the store holds and what it costs on disk: rows and octets
per table (indexes included), the DNS samples' octets each, and each
result kind's rows and raw JSON (docs/store.md).

archive: move what every run measured before DATE (2006-01-02, UTC, or
an RFC 3339 time) to the Parquet dataset in DIR, read it back, then
delete it from the store and give the space back. The runs stay in the
store; doxlab report --store DSN --dataset DIR reads both as one.
Archive rounds that are done: a resumed run measures again what was
archived of it.

brief: give the page loads written before schema 14 (doxlab 0.1.0), or
by a doxlab whose analysis skips other parts of them, their briefs:
what a report reads of each, made once, so that its first read of them
decodes a fifth of their JSON. Optional (a load without one is read
whole) and resumable; half a million loads take about two minutes.

seal: keep the DNS samples written before schema 15 (doxlab 0.1.0), or
copied in SQL, in blocks: what a report reads of them, columnar, 8,192
samples a block, so that a first report reads blocks, not rows; and
keep each run's page loads as the points a report reads of them (about
a hundred octets a load), so that a first report decodes points, not
the loads' JSON. doxlab seals what it writes as it writes it (an
experiment's points when its runs end); this seals the rest: samples
copied in SQL, a campaign's loads, points another doxlab build made.
Optional (a sample in no block is read from its row, a load without
points from its brief) and resumable. --again drops every block first
and makes them anew (a block that does not decode).
`

func runStore(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stderr, storeUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "archive":
		return runArchive(args[1:], stdout, stderr)
	case "brief":
		return runBrief(args[1:], stdout, stderr)
	case "seal":
		return runSeal(args[1:], stdout, stderr)
	case "stats":
	default:
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
		err = json.NewEncoder(stdout).Encode(stats)
	} else {
		err = stats.Write(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "doxlab store stats: %v\n", err)
		return 1
	}
	if stats.Unsealed > 0 {
		fmt.Fprintf(stderr, "%d DNS samples are in no block, and a first report reads them from their rows; seal them with: %s\n",
			stats.Unsealed, hint("store", "seal", "--store", store.Redact(*dsn)))
	}
	for _, k := range stats.Kinds {
		if k.Unbriefed > 0 {
			fmt.Fprintf(stderr, "%d %s results have no current brief, and a report reads them whole; brief them with: %s\n",
				k.Unbriefed, k.Kind, hint("store", "brief", "--store", store.Redact(*dsn)))
		}
	}
	return exitOK
}

// runBrief briefs the results that have no brief, or a stale one
// (store brief).
func runBrief(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("store brief", stderr)
	dsn := fs.String("store", "doxlab.db", "the store: a SQLite file or a postgres:// URL")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, code := openExistingStore(ctx, *dsn, "store brief", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	began, said := time.Now(), time.Now()
	n, err := st.BriefResults(ctx, func(n int) {
		if time.Since(said) > 10*time.Second {
			fmt.Fprintf(stderr, "doxlab store brief: %d results briefed, %.0f s\n", n, time.Since(began).Seconds())
			said = time.Now()
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "doxlab store brief: %v (%d briefed before it; run it again to go on)\n", err, n)
		return 1
	}
	fmt.Fprintf(stdout, "doxlab store brief: %d results briefed in %.1f s\n", n, time.Since(began).Seconds())
	return exitOK
}

// runSeal keeps the samples in no block in blocks (store seal).
func runSeal(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("store seal", stderr)
	dsn := fs.String("store", "doxlab.db", "the store: a SQLite file or a postgres:// URL")
	again := fs.Bool("again", false, "drop every block first and make them anew")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, code := openExistingStore(ctx, *dsn, "store seal", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	began := time.Now()
	if err := st.SealAll(ctx, *again); err != nil {
		fmt.Fprintf(stderr, "doxlab store seal: %v (what was sealed before it stays; run it again to go on)\n", err)
		return 1
	}
	runs, loads, err := experiment.KeepPoints(ctx, st, store.Filter{Superseded: true})
	if err != nil {
		fmt.Fprintf(stderr, "doxlab store seal: page loads' points: %v (the runs kept before it stay; run it again to go on)\n", err)
		return 1
	}
	cellRuns, cellSamples, err := experiment.KeepCells(ctx, st, store.Filter{Superseded: true})
	if err != nil {
		fmt.Fprintf(stderr, "doxlab store seal: DNS samples' cells: %v (the runs kept before it stay; run it again to go on)\n", err)
		return 1
	}
	blocks, samples, err := st.Sealed(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab store seal: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "doxlab store seal: %d samples in %s; the points of %s of %s kept; the cells of %s of %s; %.1f s\n",
		samples, plural(int(blocks), "block"), plural(loads, "result"), plural(runs, "run"),
		plural(int(cellSamples), "sample"), plural(cellRuns, "run"), time.Since(began).Seconds())
	return exitOK
}

// plural is n and what it counts: "1 block", "2 blocks".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// runArchive moves a store's old rounds to a dataset (store archive).
func runArchive(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("store archive", stderr)
	dsn := fs.String("store", "doxlab.db", "the store: a SQLite file or a postgres:// URL")
	before := fs.String("before", "", "archive what started before `DATE` (2006-01-02, UTC, or an RFC 3339 time)")
	dir := fs.String("dataset", "", "the Parquet dataset in `DIR` to move it to (made if need be)")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab store archive: "+format+"\n", a...)
		return code
	}
	cut, err := parseDay(*before)
	switch {
	case *before == "":
		return fail(exitUsage, "--before DATE is required: what started before it moves")
	case err != nil:
		return fail(exitUsage, "--before: %v", err)
	case *dir == "":
		return fail(exitUsage, "--dataset DIR is required: where it moves to")
	}
	ctx := context.Background()
	st, code := openExistingStore(ctx, *dsn, "store archive", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	x, err := st.Archive(ctx, *dir, cut)
	if err != nil {
		return fail(1, "%v", err)
	}
	if !x.Moved() {
		fmt.Fprintf(stdout, "%s: nothing in %s started before %s; nothing moved\n", *dir, store.Redact(*dsn), *before)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: %s; deleted from %s\n", *dir, x, store.Redact(*dsn))
	return exitOK
}

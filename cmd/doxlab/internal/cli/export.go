package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/suggest"
	"github.com/doxlab/doxlab/store"
)

// runExport writes a store's samples as CSV or Parquet for pandas, DuckDB
// or R.
func runExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("export", stderr)
	fs.SetOutput(stderr)
	dsn := new(string)
	storeFlag(fs, dsn)
	runID := fs.String("run", "", "only this run, or every run of this experiment, by its exact `ID` (default: all)")
	format := fs.String("format", "csv", "csv, csv-raw or parquet: csv neutralises text cells a spreadsheet would run as a formula (a leading ' before =, +, -, @); csv-raw leaves them as they are")
	outPath := fs.String("out", "", "write to `FILE` (default: standard output; required for parquet)")
	vantage := fs.String("vantage", "", "with --table samples: only what this campaign vantage point measured, by its `NAME`")
	list := fs.Bool("runs", false, "list the runs instead")
	table := fs.String("table", "samples", "samples (DNS measurements), "+exportTables()+", or results (every experiment's records whole, as JSON lines; --kind picks one)")
	kind := fs.String("kind", "", "with --table results: one of "+kindList()+" (default all)")
	superseded := fs.Bool("superseded", false, "with --table samples or results: also the runs measured again after a failed link check, which analysis leaves out")
	dataset := fs.String("dataset", "", "add the samples and every record whole to the Parquet dataset in `DIR` (Hive partitions by run, vantage point and day, and a manifest; docs/store.md), only what it lacks")
	before := fs.String("before", "", "with --dataset: only what started before `DATE` (2006-01-02, UTC, or an RFC 3339 time)")
	cpuProfile := fs.String("cpuprofile", "", "write the export's CPU profile (pprof) to `FILE`")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab export: "+format+"\n", a...)
		return code
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return fail(exitUsage, "--cpuprofile: %v", err)
	}
	defer stopProfile()
	if *dataset != "" || *before != "" {
		return exportDataset(fs, datasetArgs{dsn: *dsn, dir: *dataset, before: *before, runID: *runID, vantage: *vantage, superseded: *superseded}, stdout, stderr)
	}
	f := store.Format(*format)
	if f != store.CSV && f != store.RawCSV && f != store.Parquet {
		return fail(exitUsage, "unknown format %q (want csv, csv-raw or parquet)", *format)
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
		if err := listRuns(ctx, st, stdout); err != nil {
			return fail(1, "%v", err)
		}
		return exitOK
	}
	tables := []string{"samples"}
	for _, e := range store.Exports() {
		tables = append(tables, e.Table)
	}
	if tables = append(tables, "results"); !slices.Contains(tables, *table) {
		return fail(exitUsage, "unknown table %q (want %s)", *table, strings.Join(tables, ", "))
	}
	sel, err := selectRun(ctx, st, *runID)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *vantage != "" && *table != "samples" {
		return fail(exitUsage, "--vantage selects samples; the %s table has no vantage points", *table)
	}
	if *superseded && *table != "samples" && *table != "results" {
		return fail(exitUsage, "--superseded applies to --table samples and results; the %s table reads what analysis reads", *table)
	}
	if *table == "results" && f == store.Parquet {
		return fail(exitUsage, "results are JSON lines; leave --format out")
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
	var n int
	switch *table {
	case "samples":
		rw := store.NewRowWriter[store.Row](w, f)
		if err = st.EachRows(ctx, store.Filter{RunPrefix: sel.prefix(), Vantage: *vantage, Superseded: *superseded}, rw.WriteRows); err == nil {
			err = rw.Close()
		}
		n = rw.N
	case "results":
		kinds := store.Kinds()
		if *kind != "" {
			if !slices.Contains(kinds, store.Kind(*kind)) {
				return fail(exitUsage, "unknown kind %q (want %s)", *kind, kindList())
			}
			kinds = []store.Kind{store.Kind(*kind)}
		}
		for _, k := range kinds {
			if err == nil {
				err = st.FilteredResults(ctx, store.Filter{RunPrefix: sel.prefix(), Superseded: *superseded}, k, func(id string, raw []byte) error {
					if !sel.keep(id) {
						return nil
					}
					n++
					_, err := fmt.Fprintf(w, "{\"run_id\":%q,\"kind\":%q,\"record\":%s}\n", id, k, raw)
					return err
				})
			}
		}
	default:
		for _, e := range store.Exports() {
			if e.Table == *table {
				n, err = e.Write(ctx, st, sel.keep, w, f)
			}
		}
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if n == 0 {
		// An empty file is no answer: say so, and fail, as grep does.
		if *vantage != "" {
			return fail(1, "no samples measured from vantage point %q in %s%s", *vantage, cmp.Or(*runID, "the store"), closestVantage(ctx, st, *vantage))
		}
		return fail(1, "no %s in %s (tables: %s)", *table, cmp.Or(*runID, "the store"), strings.Join(tables, ", "))
	}
	if *outPath != "" {
		fmt.Fprintf(stderr, "doxlab export: %d %s to %s\n", n, *table, *outPath)
	}
	return exitOK
}

// listRuns prints the stored runs, a line each, with the run that
// superseded one.
func listRuns(ctx context.Context, st *store.Store, stdout io.Writer) error {
	rows, err := st.RunRows(ctx, func(string) bool { return true })
	if err != nil {
		return err
	}
	for _, r := range rows {
		note := ""
		if r.SupersededBy != "" {
			note = "  superseded: measured again as " + r.SupersededBy
		}
		method := ""
		if r.Method > 0 {
			method = fmt.Sprintf(" method v%d", r.Method)
		}
		fmt.Fprintf(stdout, "%s  %-22s %s  profile %-9s %s%s on %s (%s)%s\n", r.RunID, r.Kind, r.StartedAt.Format("2006-01-02 15:04:05"), orDash(r.Profile), r.Doxlab, method, r.Hostname, r.Kernel, note)
	}
	return nil
}

// closestVantage suggests the stored vantage point closest to name.
func closestVantage(ctx context.Context, st *store.Store, name string) string {
	vs, err := st.Vantages(ctx)
	if err != nil || len(vs) == 0 {
		return " (it holds no campaign samples)"
	}
	return suggest.Closest(name, vs)
}

// exportTables names the experiments' own export tables for help.
func exportTables() string {
	var out []string
	for _, e := range store.Exports() {
		out = append(out, e.Table+" ("+e.Doc+")")
	}
	return strings.Join(out, ", ")
}

// kindList spells the declared result kinds for help and errors.
func kindList() string {
	var names []string
	for _, k := range store.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
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
	if !storeExists(dsn) {
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

// openForAnalysis opens what a report reads: the store at dsn, or with
// a dataset (report --dataset) the store and the dataset together, or
// the dataset alone when the store was not named (an empty store of the
// command's own, removed by done).
func openForAnalysis(ctx context.Context, fs *flag.FlagSet, dsn, dataset, cmd string, stderr io.Writer) (st *store.Store, done func(), code int) {
	if dataset == "" {
		st, code = openExistingStore(ctx, dsn, cmd, stderr)
		return st, func() {}, code
	}
	d, err := store.OpenDataset(ctx, dataset)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab %s: %v\n", cmd, err)
		return nil, nil, exitUsage
	}
	done = func() {}
	if !flagSet(fs, "store") {
		tmp, err := os.MkdirTemp("", "doxlab-dataset-")
		if err != nil {
			fmt.Fprintf(stderr, "doxlab %s: %v\n", cmd, err)
			return nil, nil, 1
		}
		dsn, done = filepath.Join(tmp, "empty.db"), func() { os.RemoveAll(tmp) }
		if st, err = store.Open(ctx, dsn); err != nil {
			done()
			fmt.Fprintf(stderr, "doxlab %s: %v\n", cmd, err)
			return nil, nil, 1
		}
	} else if st, code = openExistingStore(ctx, dsn, cmd, stderr); st == nil {
		return nil, nil, code
	}
	if err := st.Attach(ctx, d); err != nil {
		st.Close()
		done()
		fmt.Fprintf(stderr, "doxlab %s: %v\n", cmd, err)
		return nil, nil, exitUsage
	}
	return st, done, exitOK
}

// flagSet says whether the command line set a flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// storeExists says whether dsn names a store that may exist: a file
// that does, or a database URL (which its server checks).
func storeExists(dsn string) bool {
	_, err := os.Stat(dsn)
	return err == nil || isURL(dsn)
}

// selection is what --run names: every run (""), one run exactly, or
// every run of one experiment.
type selection struct {
	id         string
	experiment bool // id is an experiment's: its runs are id + "-" + profile
}

// keep reports whether a run ID is selected.
func (s selection) keep(runID string) bool {
	switch {
	case s.id == "":
		return true
	case s.experiment:
		return strings.HasPrefix(runID, s.id+"-")
	}
	return runID == s.id
}

// prefix is the selection as a run-ID prefix, for the loaders that take
// one; selectRun makes sure it selects nothing more.
func (s selection) prefix() string {
	if s.experiment {
		return s.id + "-"
	}
	return s.id
}

// selectRun resolves --run exactly, against the store's run and
// experiment IDs: an unknown ID is an error naming the closest known.
func selectRun(ctx context.Context, st *store.Store, id string) (selection, error) {
	if id == "" {
		return selection{}, nil
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return selection{}, err
	}
	exps, err := experiment.StoredIDs(ctx, st)
	if err != nil {
		return selection{}, err
	}
	if slices.Contains(exps, id) {
		return selection{id: id, experiment: true}, nil
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if !slices.Contains(ids, id) {
		return selection{}, fmt.Errorf("no run or experiment %q in the store%s", id, suggest.Closest(id, append(exps, ids...)))
	}
	// A run ID that starts another's ("-4g" and "-4g-medium") would
	// select both where runs are chosen by prefix.
	for _, other := range ids {
		if other != id && strings.HasPrefix(other, id) {
			return selection{}, fmt.Errorf("run %q is the start of run %q too; name the experiment instead (%s) or export the run alone", id, other, suggest.Closest(id, exps))
		}
	}
	return selection{id: id}, nil
}

// datasetArgs are export --dataset's.
type datasetArgs struct {
	dsn, dir, before, runID, vantage string
	superseded                       bool
}

// exportDataset adds a store's runs to a dataset (export --dataset).
func exportDataset(fs *flag.FlagSet, a datasetArgs, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "doxlab export: "+format+"\n", args...)
		return code
	}
	switch {
	case a.dir == "":
		return fail(exitUsage, "--before goes with --dataset DIR")
	case flagSet(fs, "format") && fs.Lookup("format").Value.String() != "parquet":
		return fail(exitUsage, "a dataset is Parquet: --format parquet, or leave it out")
	case flagSet(fs, "out") || flagSet(fs, "table") || flagSet(fs, "kind") || flagSet(fs, "runs"):
		return fail(exitUsage, "--dataset writes every table to DIR: leave out --out, --table, --kind and --runs")
	}
	cut, err := parseDay(a.before)
	if err != nil {
		return fail(exitUsage, "--before: %v", err)
	}
	ctx := context.Background()
	st, code := openExistingStore(ctx, a.dsn, "export", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	sel, err := selectRun(ctx, st, a.runID)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	x, err := st.ExportDataset(ctx, a.dir, store.Filter{RunPrefix: sel.prefix(), Vantage: a.vantage, Superseded: a.superseded}, cut)
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "%s: %s\n", a.dir, x)
	return exitOK
}

// parseDay reads a time a day starts (2006-01-02, UTC) or an RFC 3339
// time; "" is none.
func parseDay(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want a day (2006-01-02, UTC) or an RFC 3339 time", s)
	}
	return t, nil
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/doxlab/doxlab/experiment/dnsrtt"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/report/compare"
	"github.com/doxlab/doxlab/store"
)

// runReport renders stored samples as figures and one HTML page.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", stderr)
	fs.SetOutput(stderr)
	dsn := new(string)
	storeFlag(fs, dsn)
	runID := fs.String("run", "", "only this experiment's runs, or this run, by its exact `ID` (default: all)")
	vantage := fs.String("vantage", "", "only the DNS samples this campaign vantage point measured, by its `NAME`")
	out := fs.String("out", "doxlab-report", "directory for report.html and the figures")
	asJSON := fs.Bool("json", false, "print every statistic of the tables and findings as JSON instead (cells with their keys, n, median, 95 % interval, p-value; findings with their verdicts)")
	okRcodes := okRcodesFlag(fs)
	compareRuns := fs.Bool("compare", false, "set runs against each other, benchstat's way: doxlab report --compare OLD NEW [MORE...], each a run or experiment `ID` of --store, or ID@STORE of another store")
	by := fs.String("by", "", "with --run: compare the run's rounds (round), benchstat's way")
	dataset := fs.String("dataset", "", "also read the dataset in `DIR` or at s3://BUCKET/PREFIX (doxlab export --dataset, doxlab store archive; the AWS tools' environment reaches a bucket); without --store, the dataset alone")
	maxCells := fs.Int("max-cells", dnsrtt.MaxCells, "DNS cells (vantage point × resolver × transport × condition × profile, ~5 KB each) held apart; the samples of further resolvers count in the pooled tables only")
	cpuProfile := fs.String("cpuprofile", "", "write the report's CPU profile (pprof) to `FILE`")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab report: --cpuprofile: %v\n", err)
		return exitUsage
	}
	defer stopProfile()
	switch {
	case *by != "" && *by != "round":
		fmt.Fprintf(stderr, "doxlab report: --by %q: only round is known\n", *by)
		return exitUsage
	case *compareRuns && *by != "":
		fmt.Fprintf(stderr, "doxlab report: --compare and --by exclude each other\n")
		return exitUsage
	case *compareRuns && len(pos) < 2:
		fmt.Fprintf(stderr, "doxlab report: --compare wants two runs or more: doxlab report --compare OLD NEW\n")
		return exitUsage
	case !*compareRuns && len(pos) > 0:
		fmt.Fprintf(stderr, "doxlab report: unexpected argument %q (runs to compare go after --compare)\n", pos[0])
		return exitUsage
	case *by != "" && *runID == "":
		fmt.Fprintf(stderr, "doxlab report: --by round needs --run: the campaign run whose rounds to compare\n")
		return exitUsage
	}
	if *maxCells < 1 {
		fmt.Fprintf(stderr, "doxlab report: --max-cells %d: want 1 or more\n", *maxCells)
		return exitUsage
	}
	dnsrtt.MaxCells = *maxCells
	answers, err := parseOKRcodes(*okRcodes)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab report: %v\n", err)
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab report: "+format+"\n", a...)
		return code
	}
	ctx := context.Background()
	if *compareRuns || *by != "" {
		return runCompare(ctx, compareArgs{fs: fs, dsn: *dsn, dataset: *dataset, runID: *runID, sels: pos, out: *out, json: *asJSON, answers: answers}, stdout, stderr)
	}
	st, done, code := openForAnalysis(ctx, fs, *dsn, *dataset, "report", stderr)
	if st == nil {
		return code
	}
	defer done()
	defer st.Close()
	sel, err := selectRun(ctx, st, *runID)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	in, runs, err := report.LoadFiltered(ctx, st, store.Filter{RunPrefix: sel.prefix(), Vantage: *vantage, OKRcodes: answers.Rcodes()})
	if errors.Is(err, store.ErrDamagedBlock) {
		return fail(1, "%v; make the blocks anew with: %s", err, hint("store", "seal", "--again", "--store", store.Redact(*dsn)))
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if *vantage != "" && in.Empty() {
		return fail(1, "no samples measured from vantage point %q%s", *vantage, closestVantage(ctx, st, *vantage))
	}
	if *asJSON {
		if in.Empty() {
			return fail(1, "no samples to report")
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report.Summarize(in)); err != nil {
			return fail(1, "%v", err)
		}
		return exitOK
	}
	rep, err := report.Render(in, *out, report.Title(runs))
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "%s: %s, %d figures (SVG, PDF and 300-dpi PNG, one and two columns wide)\n", rep.HTML, in.Counts(), len(rep.Figures)/len(figure.Suffixes))
	return exitOK
}

// compareArgs are report --compare's and --by round's.
type compareArgs struct {
	fs                       *flag.FlagSet
	dsn, dataset, runID, out string   // the dataset is read with --store's runs
	sels                     []string // ID or ID@STORE, for --compare
	json                     bool
	answers                  measure.Answers
}

// compareSelection reads one run compare names, ID or ID@STORE (--store's
// without the @), refusing what selects no one run or one seen already.
func compareSelection(sel, dsnDefault string, seen map[[2]string]bool) (id, dsn string, err error) {
	id, dsn, ok := strings.Cut(sel, "@") // a run ID holds no @; a database URL may
	switch {
	case id == "":
		// An empty ID selects every run: "@b.db" compared all of b.db.
		return "", "", fmt.Errorf("%q: want a run or experiment ID, or ID@STORE", sel)
	case ok && dsn == "":
		return "", "", fmt.Errorf("%q: want a store after the @ (without it, --store's run)", sel)
	case !ok:
		dsn = dsnDefault
	}
	// A file by its absolute path: x.db and ./x.db are one store.
	file := dsn
	if !strings.Contains(dsn, "://") {
		if abs, err := filepath.Abs(dsn); err == nil {
			file = abs
		}
	}
	k := [2]string{id, file}
	if seen[k] {
		return "", "", fmt.Errorf("%s is named twice: compare it with another run", sel)
	}
	seen[k] = true
	return id, dsn, nil
}

// runCompare prints and renders runs against each other (--compare), or
// a run's rounds (--by round).
func runCompare(ctx context.Context, a compareArgs, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "doxlab report: "+format+"\n", args...)
		return code
	}
	stores := map[string]*store.Store{}
	var dones []func()
	defer func() {
		for _, st := range stores {
			st.Close()
		}
		for _, done := range dones {
			done()
		}
	}()
	open := func(dsn string) (*store.Store, int) {
		if st, ok := stores[dsn]; ok {
			return st, exitOK
		}
		if dsn == a.dsn && a.dataset != "" { // --store's runs, with what was archived of them
			st, done, code := openForAnalysis(ctx, a.fs, dsn, a.dataset, "report", stderr)
			if st != nil {
				stores[dsn], dones = st, append(dones, done)
			}
			return st, code
		}
		st, code := openExistingStore(ctx, dsn, "report", stderr)
		if st != nil {
			stores[dsn] = st
		}
		return st, code
	}
	var srcs []compare.Source
	var runs []store.Run
	sels := a.sels
	if a.runID != "" {
		sels = []string{a.runID}
	}
	seen := map[[2]string]bool{}
	for _, sel := range sels {
		id, dsn, err := compareSelection(sel, a.dsn, seen)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		st, code := open(dsn)
		if st == nil {
			return code
		}
		where := store.Redact(dsn)
		if dsn == a.dsn && a.dataset != "" {
			where = a.dataset
			if flagSet(a.fs, "store") {
				where = store.Redact(dsn) + " with " + a.dataset
			}
		}
		s, err := selectRun(ctx, st, id)
		if err != nil {
			return fail(exitUsage, "%s: %v", where, err)
		}
		all, err := st.Runs(ctx)
		if err != nil {
			return fail(1, "%v", err)
		}
		for _, r := range all {
			if s.keep(r.ID) {
				runs = append(runs, r)
			}
		}
		srcs = append(srcs, compare.Source{Name: id, Store: st, Where: where, Filter: store.Filter{RunPrefix: s.prefix(), OKRcodes: a.answers.Rcodes()}})
	}
	var tables []*compare.Table
	if a.runID != "" {
		t, err := compare.Rounds(ctx, a.answers, srcs[0])
		if err != nil {
			return fail(1, "%v", err)
		}
		tables = append(tables, t)
	} else {
		dns, err := compare.Runs(ctx, a.answers, srcs...)
		if err != nil {
			return fail(1, "%v", err)
		}
		loads, err := compare.PageLoads(ctx, srcs...)
		if err != nil {
			return fail(1, "%v", err)
		}
		tables = append(tables, dns, loads)
	}
	in := report.Input{Runs: runs}
	for _, t := range tables {
		if n, _ := t.Count(); n > 0 {
			in.Results = append(in.Results, report.Results{Experiment: t.Kind.ID, Results: t})
		}
	}
	if len(in.Results) == 0 {
		return fail(1, "no DNS samples or page loads in %s to compare", strings.Join(sels, ", "))
	}
	if a.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report.Summarize(in)); err != nil {
			return fail(1, "%v", err)
		}
		return exitOK
	}
	for i, r := range in.Results {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := r.WriteTable(stdout); err != nil {
			return fail(1, "%v", err)
		}
	}
	names := tables[0].Names
	rep, err := report.Render(in, a.out, "doxlab: "+strings.Join(names, " against "))
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "%s: %s, %d figures\n", rep.HTML, in.Counts(), len(rep.Figures)/len(figure.Suffixes))
	return exitOK
}

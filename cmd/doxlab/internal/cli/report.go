package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/report/figure"
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
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab report: "+format+"\n", a...)
		return code
	}
	ctx := context.Background()
	st, code := openExistingStore(ctx, *dsn, "report", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	sel, err := selectRun(ctx, st, *runID)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	in, runs, err := report.LoadFiltered(ctx, st, store.Filter{RunPrefix: sel.prefix(), Vantage: *vantage})
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

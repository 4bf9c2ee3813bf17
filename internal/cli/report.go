package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/verify"
)

// runReport renders stored samples as figures and one HTML page.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := new(string)
	storeFlag(fs, dsn)
	runPrefix := fs.String("run", "", "only runs whose ID starts with this (an experiment ID, a run ID); default all")
	out := fs.String("out", "doxlab-report", "directory for report.html and the figures")
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
	rows, err := st.Rows(ctx, "")
	if err != nil {
		return fail(1, "%v", err)
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return fail(1, "%v", err)
	}
	var sel []store.Row
	for _, r := range rows {
		if strings.HasPrefix(r.RunID, *runPrefix) {
			sel = append(sel, r)
		}
	}
	var selRuns []store.Run
	for _, r := range runs {
		if strings.HasPrefix(r.ID, *runPrefix) {
			selRuns = append(selRuns, r)
		}
	}
	loads, err := st.Loads(ctx, *runPrefix)
	if err != nil {
		return fail(1, "%v", err)
	}
	hol, err := experiment.LoadHOL(ctx, st, *runPrefix)
	if err != nil {
		return fail(1, "%v", err)
	}
	amp, err := experiment.LoadAmplification(ctx, st, *runPrefix)
	if err != nil {
		return fail(1, "%v", err)
	}
	ov, err := experiment.LoadOverhead(ctx, st, *runPrefix)
	if err != nil {
		return fail(1, "%v", err)
	}
	sv, err := verify.LoadSurvey(ctx, st, *runPrefix)
	if err != nil {
		return fail(1, "%v", err)
	}
	rep, err := report.Render(report.Input{Rows: sel, Loads: loads, HOL: hol, Amp: amp, Overhead: ov, Survey: sv}, *out, report.Title(selRuns))
	if err != nil {
		return fail(1, "%v", err)
	}
	fmt.Fprintf(stdout, "%s: %d samples, %d page loads, %d head-of-line queries, %d handshakes, %d captured connections, %d figures (PNG and SVG)\n", rep.HTML, len(sel), len(loads), len(hol), len(amp), len(ov), len(rep.Figures)/2)
	return exitOK
}

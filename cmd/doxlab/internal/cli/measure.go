package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/internal/printable"
	"github.com/doxlab/doxlab/internal/progress"
	"github.com/doxlab/doxlab/internal/suggest"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

const measureUsage = `usage: doxlab measure [flags] TARGET...

Measures DNS response times the PAM 2022 way: per target, transport and
condition a cache-warming query, then the measured query on a fresh
connection, then an RTT probe on the same port and protocol. TARGET is a
host or IP (each transport on its default port) or a full server URL.

Conditions: fresh (reuse nothing), pam (QUIC version and token, as the
paper), resumed (plus the TLS ticket), 0rtt (plus early data; DoQ, DoH/3).

flags:
`

func runMeasure(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, measureUsage); fs.PrintDefaults() }
	var (
		transports = fs.String("transports", strings.Join(protocol.Default(), ","), "transports to measure")
		conditions = fs.String("conditions", "fresh,resumed,0rtt", "conditions to measure")
		name       = fs.String("name", "test.com", "query name")
		qtype      = fs.String("type", "A", "query type")
		norec      = fs.Bool("norecurse", false, "clear the RD bit")
		timeout    = fs.Duration("timeout", 5*time.Second, "bound on each exchange")
		conc       = fs.Int("concurrency", 1, "tasks at once")
		rate       = fs.Float64("rate", 0, "at most this many tasks per second (0: no limit)")
		seed       = fs.Uint64("seed", 0, "seed for the random task order (0: random)")
		file       = fs.String("targets", "", "read targets from `FILE`, one per line")
		asJSON     = fs.Bool("json", false, "print every sample as a JSON line instead of the summary")
		outPath    = fs.String("out", "", "also write every sample as JSON lines to `FILE`")
		storeDSN   = fs.String("store", "", "keep the run and every sample in this store: a SQLite file or postgres:// URL")
		runID      = fs.String("run", "", "continue this stored run, skipping what it measured already (same flags as before)")
		ca         = fs.String("ca", "", "verify servers against the PEM certificates in `FILE`")
		insecure   = fs.Bool("insecure", false, "do not verify certificates")
		sni        = fs.String("sni", "", "server name to send and verify")
		okRcodes   = okRcodesFlag(fs)
		repeat     = new(int)
	)
	*repeat = 1
	experiment.CountVar(fs, repeat, "repeat", "`N` measurements per target, transport and condition")
	targets, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab measure: "+format+"\n", a...)
		return exitUsage
	}
	if *file != "" {
		more, err := measure.ReadTargets(*file)
		if err != nil {
			return fail("%v", err)
		}
		targets = append(targets, more...)
	}
	for _, tg := range targets {
		if err := measure.CheckTarget(tg); err != nil {
			return fail("target %q: %v", tg, err)
		}
	}
	if *timeout <= 0 {
		// The library takes 0 for its default: a 0s typed here was
		// five seconds unsaid.
		return fail("--timeout %v: want a positive duration", *timeout)
	}
	t, ok := dnswire.ParseType(*qtype)
	if !ok {
		return fail("unknown record type %q", *qtype)
	}
	spec := measure.Spec{
		Targets: targets, Transports: splitList(*transports), Conditions: splitList(*conditions),
		Name: *name, Type: t, NoRD: *norec, Repeat: *repeat, Timeout: *timeout, Concurrency: *conc, Rate: *rate, Seed: *seed,
		Options: transport.Options{Insecure: *insecure, SNI: *sni},
	}
	if *ca != "" {
		pool, err := loadCA(*ca)
		if err != nil {
			return fail("%v", err)
		}
		spec.Options.RootCAs = pool
	}
	if _, err := spec.Tasks(); err != nil {
		return fail("%v", err)
	}
	answers, err := parseOKRcodes(*okRcodes)
	if err != nil {
		return fail("%v", err)
	}
	return runMeasurement(spec, measureRun{store: *storeDSN, runID: *runID, kind: "measure", json: *asJSON, out: *outPath, answers: answers, args: append([]string{"measure"}, args...)}, stdout, stderr)
}

// okRcodesFlag is --ok-rcodes, for the commands that time answers.
func okRcodesFlag(fs *flag.FlagSet) *string {
	return fs.String("ok-rcodes", strings.Join(measure.DefaultOKRcodes, ","), "`RCODES` that count as answered, and are timed; any other answer is a failure named by its rcode")
}

// parseOKRcodes reads --ok-rcodes.
func parseOKRcodes(s string) (measure.Answers, error) {
	a, err := measure.ParseAnswers(splitList(s))
	if err != nil {
		return a, fmt.Errorf("--ok-rcodes: %w", err)
	}
	return a, nil
}

// measureRun says where a measurement's samples go.
type measureRun struct {
	store, runID, kind, out string
	json                    bool
	answers                 measure.Answers // which rcodes count as answered
	fresh                   bool            // campaign run --new: never continue an earlier run by its spec
	// args are the command's own (after "doxlab"), for the line that
	// says how to continue an interrupted run.
	args []string
}

// resumeCommand is the command that continues run id.
func (mr measureRun) resumeCommand(id string) string { return continueHint(mr.args, id) }

// beginOrContinue opens the store before anything is measured (an
// unreachable store fails now, not after the first sample) and begins a
// run of spec, or continues the one mr names, or for a campaign its
// spec's last unfinished run: spec then skips the tasks stored. earlier
// is how many samples the continued run holds.
func (mr *measureRun) beginOrContinue(ctx context.Context, spec *measure.Spec, tasks int, stderr io.Writer) (st *store.Store, run store.Run, earlier int, err error) {
	// A run to continue is in a store that exists: a mistyped one is not
	// created.
	if mr.runID != "" && !storeExists(mr.store) {
		return nil, run, 0, fmt.Errorf("--run %s: no store at %s", mr.runID, mr.store)
	}
	opened, err := store.Open(ctx, mr.store)
	if err != nil {
		return nil, run, 0, err
	}
	defer func() { // returned with an error: closed here
		if err != nil {
			opened.Close()
		}
	}()
	st = opened
	if mr.runID == "" && mr.kind == "campaign" && !mr.fresh {
		// Running the same campaign again continues its last run, and
		// says so; a finished one is not re-opened unasked.
		if mr.runID = lastRun(ctx, st, mr.kind, *spec); mr.runID != "" {
			done, err := st.Done(ctx, mr.runID)
			if err != nil {
				return nil, run, 0, err
			}
			if len(done) >= tasks {
				return nil, run, 0, fmt.Errorf("run %s of this spec is complete (%d samples); add --new to measure it again as a new run, or see it with: %s", mr.runID, len(done), reportHint(mr.store, mr.runID))
			}
			fmt.Fprintf(stderr, "doxlab campaign: this spec's run %s is unfinished (%d of %d tasks stored): continuing it (--new begins a new run)\n", mr.runID, len(done), tasks)
		}
	}
	if mr.runID == "" {
		run = store.NewRun(mr.kind, "", *spec)
		if err := st.BeginRun(ctx, run); err != nil {
			return nil, run, 0, err
		}
		fmt.Fprintf(stderr, "doxlab %s: run %s (continue it with: %s)\n", mr.kind, run.ID, mr.resumeCommand(run.ID))
		return st, run, 0, nil
	}
	if err := knownRun(ctx, st, mr.runID, mr.kind); err != nil {
		return nil, run, 0, err
	}
	done, err := st.Done(ctx, mr.runID)
	if err != nil {
		return nil, run, 0, err
	}
	spec.Skip = func(t measure.Task) bool { return done[store.TaskKey(t)] }
	run.ID = mr.runID
	fmt.Fprintf(stderr, "doxlab %s: continuing run %s (%d samples stored)\n", mr.kind, run.ID, len(done))
	return st, run, len(done), nil
}

// runMeasurement runs a spec for 'measure' and 'campaign run': opens the
// store first (failing fast), continues a run or begins one, writes each
// sample as it is taken, shows progress and prints the summary.
func runMeasurement(spec measure.Spec, mr measureRun, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab %s: "+format+"\n", append([]any{mr.kind}, a...)...)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var st *store.Store
	var run store.Run
	earlier := 0 // samples a continued run had stored
	if mr.runID != "" && mr.store == "" {
		return fail("--run needs --store")
	}
	// A spec no run can mean fails here, before a run is begun.
	tasks, err := spec.Tasks()
	if err != nil {
		return fail("%v", err)
	}
	if mr.store != "" {
		if st, run, earlier, err = mr.beginOrContinue(ctx, &spec, len(tasks), stderr); err != nil {
			if ctx.Err() != nil { // interrupted while the store opened: no usage error
				fmt.Fprintf(stderr, "doxlab %s: stopped (%v) before measuring; nothing new was stored\n", mr.kind, ctx.Err())
				return 1
			}
			return fail("%v", err)
		}
		defer st.Close()
	}
	var storeErr, outErr error
	var outFile *os.File
	if mr.out != "" {
		f, err := os.Create(mr.out)
		if err != nil {
			return fail("%v", err)
		}
		defer f.Close()
		outFile = f
	}
	var samples []*measure.Sample
	meter := progress.New(stderr, "tasks")
	defer meter.Done()
	spec.Progress = meter.Update
	// A sample measured is stored, even as an interrupt stops the run:
	// the writes do not end with the measuring (a write cut short by it
	// lost the sample, and said the store had failed).
	wctx := context.WithoutCancel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = measure.Run(ctx, spec, func(s *measure.Sample) {
		samples = append(samples, s)
		if st != nil && storeErr == nil {
			storeErr = store.Retry(wctx, func() error { return st.Write(wctx, run.ID, s) }, func(err error, wait time.Duration) {
				fmt.Fprintf(stderr, "doxlab %s: %v; trying again in %v\n", mr.kind, err, wait)
			})
			if storeErr != nil {
				cancel() // stop measuring what cannot be kept; what is stored stays
			}
		}
		if outFile != nil && outErr == nil {
			if outErr = json.NewEncoder(outFile).Encode(s); outErr != nil && st == nil {
				cancel() // the samples go nowhere else
			}
		}
		if mr.json {
			json.NewEncoder(stdout).Encode(s)
		}
	})
	if earlier > 0 && storeErr == nil {
		// The table is the whole run's, what earlier sessions stored too.
		var all []*measure.Sample
		if err := st.Samples(context.Background(), run.ID, func(x *measure.Sample) error { all = append(all, x); return nil }); err != nil {
			fmt.Fprintf(stderr, "doxlab %s: reading the run's earlier samples: %v (the table shows this session's)\n", mr.kind, err)
		} else {
			if !mr.json {
				fmt.Fprintf(stdout, "run %s: %d samples stored before, %d now\n", run.ID, earlier, len(samples))
			}
			samples = all
		}
	}
	failed, canceled := 0, 0
	for _, s := range samples {
		switch {
		case s.Status == transport.StatusCanceled:
			canceled++
		case mr.answers.SampleOutcome(s) != "" || s.Measure == nil:
			failed++
		}
	}
	if !mr.json {
		summarize(stdout, samples, spec.Targets, mr.answers)
	}
	if outFile != nil && outErr == nil {
		outErr = outFile.Close() // a file's last octets may fail only here
	}
	if outErr != nil {
		kept := "none was kept elsewhere"
		if st != nil && storeErr == nil {
			kept = "every one is in the store, run " + run.ID
		}
		fmt.Fprintf(stderr, "doxlab %s: writing the samples to %s: %v (%s)\n", mr.kind, mr.out, outErr, kept)
		return 1
	}
	if storeErr != nil {
		fmt.Fprintf(stderr, "doxlab %s: %v (samples stored before it are kept; continue with: %s)\n", mr.kind, storeErr, mr.resumeCommand(run.ID))
		return 1
	}
	if err != nil {
		switch {
		case st != nil:
			fmt.Fprintf(stderr, "doxlab %s: stopped (%v) after %d samples, all stored; continue with: %s\n", mr.kind, err, len(samples), mr.resumeCommand(run.ID))
		default:
			fmt.Fprintf(stderr, "doxlab %s: stopped (%v) after %d samples; none was stored (--store keeps them, and lets a run be continued)\n", mr.kind, err, len(samples))
		}
		return 1
	}
	if st != nil && !mr.json {
		fmt.Fprintf(stderr, "doxlab %s: stored in run %s; see it with: %s\n", mr.kind, run.ID, reportHint(mr.store, run.ID))
	}
	switch {
	case len(samples) > canceled && failed == len(samples)-canceled:
		fmt.Fprintf(stderr, "doxlab %s: every one of the %d measured tasks failed; nothing answered with %s\n", mr.kind, failed, strings.Join(mr.answers.Rcodes(), " or "))
		return 1
	case failed > 0:
		fmt.Fprintf(stderr, "doxlab %s: %d of %d measured tasks failed\n", mr.kind, failed, len(samples)-canceled)
	}
	return exitOK
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// summarize prints, per target (resolver), transport and condition, the
// answered count and the medians of the answered samples, the total with
// its 95 % interval; failed samples are counted by what they failed with
// (an rcode not taken, or a status), never timed; cancelled tasks (an
// interrupted run) are no samples at all.
func summarize(w io.Writer, samples []*measure.Sample, given []string, answers measure.Answers) {
	type key struct{ target, tr, cond string }
	keys, groups := order.Group(samples, func(s *measure.Sample) key { return key{s.Target, s.Transport, s.Condition} })
	// A resolver's rows together, resolvers in the order given (then
	// measured), then conditions and transports in the protocol table's
	// order.
	trOf := map[string]string{}
	var targets []string
	slices.SortStableFunc(keys, func(a, b key) int {
		ia, ib := slices.Index(given, a.target), slices.Index(given, b.target)
		return cmp.Compare(uint(ia), uint(ib)) // -1, not given, last
	})
	for _, k := range keys {
		if _, ok := trOf[k.target]; !ok {
			trOf[k.target] = k.tr
			targets = append(targets, k.target)
		}
	}
	resolver, rank := measure.Resolvers(targets, func(t string) string { return trOf[t] }), map[string]int{}
	for _, t := range targets {
		if _, ok := rank[resolver[t]]; !ok {
			rank[resolver[t]] = len(rank)
		}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(rank[resolver[a.target]], rank[resolver[b.target]]), order.Compare(a.cond, b.cond), order.Compare(a.tr, b.tr),
			strings.Compare(a.target, b.target))
	})
	tw := len("target")
	for _, k := range keys {
		tw = max(tw, len(k.target))
	}
	fmt.Fprintf(w, "medians of the answered samples (rcode %s); total_ms with its 95 %% confidence interval ([±∞]: too few samples for one)\n", strings.Join(answers.Rcodes(), " or "))
	fmt.Fprintf(w, "%-*s %-6s %-8s %8s %9s %9s %9s %9s %-21s %8s %8s %8s %7s %5s\n", tw, "target", "transp", "cond", "answered", "probe_ms", "hs_ms", "query_ms", "total_ms", "total_ms 95% CI", "hs_rtt", "res_rtt", "tot_rtt", "resumed", "0rtt")
	byOutcome, failed, canceled := map[string]int{}, 0, 0
	for _, k := range keys {
		var probe, hs, q, tot, hsR, resR, totR []float64
		ok, n, resumed, zero := 0, 0, 0, 0
		for _, s := range groups[k] {
			if s.Status == transport.StatusCanceled {
				canceled++
				continue
			}
			n++
			if o := answers.SampleOutcome(s); o != "" || s.Measure == nil {
				byOutcome[cmp.Or(o, "unknown")]++
				failed++
				continue
			}
			ok++
			hs, q, tot = append(hs, s.Measure.Timing.HandshakeMs), append(q, s.Measure.Timing.QueryMs), append(tot, s.Measure.Timing.TotalMs)
			if s.Measure.Conn.TLSResumed {
				resumed++
			}
			if s.Measure.Conn.Used0RTT {
				zero++
			}
			if s.Probe != nil && s.Probe.RTTMs > 0 {
				probe = append(probe, s.Probe.RTTMs)
			}
			if s.RTTs != nil {
				hsR, resR, totR = append(hsR, s.RTTs.Handshake), append(resR, s.RTTs.Resolve), append(totR, s.RTTs.Total)
			}
		}
		if n == 0 {
			continue
		}
		total := stats.Summarize(tot)
		f3 := func(v []float64) string { return stats.F(stats.Median(v), 3) }
		f2 := func(v []float64) string { return stats.F(stats.Median(v), 2) }
		fmt.Fprintf(w, "%-*s %-6s %-8s %8s %9s %9s %9s %9s %-21s %8s %8s %8s %7s %5s\n", tw, printable.String(k.target), k.tr, k.cond, fmt.Sprintf("%d/%d", ok, n),
			f3(probe), f3(hs), f3(q), stats.F(total.Median, 3), total.CI(3), f2(hsR), f2(resR), f2(totR),
			fmt.Sprintf("%d/%d", resumed, ok), fmt.Sprintf("%d/%d", zero, ok))
	}
	fmt.Fprintf(w, "answered %d/%d", len(samples)-failed-canceled, len(samples)-canceled)
	if failed > 0 {
		fmt.Fprintf(w, "; %s", stats.Counts(byOutcome))
	}
	if canceled > 0 {
		fmt.Fprintf(w, " (%d tasks cancelled, not counted)", canceled)
	}
	fmt.Fprintln(w)
}

// knownRun fails unless the store holds a run of kind with exactly this
// ID, naming the closest it holds.
func knownRun(ctx context.Context, st *store.Store, id, kind string) error {
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	var ids []string
	for _, r := range runs {
		if r.Kind != kind {
			continue
		}
		if r.ID == id {
			return nil
		}
		ids = append(ids, r.ID)
	}
	return fmt.Errorf("no %s run %q in the store%s", kind, id, suggest.Closest(id, ids))
}

// lastRun is the newest stored run of this kind with the same spec, or "".
func lastRun(ctx context.Context, st *store.Store, kind string, spec measure.Spec) string {
	want, _ := json.Marshal(spec)
	return lastRunOf(ctx, st, kind, want)
}

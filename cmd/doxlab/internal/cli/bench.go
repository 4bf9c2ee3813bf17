package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

const benchUsage = `usage: doxlab bench [flags] URL...

Loads DNS servers over any transport. Open loop by default (--rate):
every query has an intended send time and its latency counts from it, so
a stalled server shows as latency, not as a lower rate. --rate 0 runs
closed loop with --workers. Percentiles come from HDR histograms.
Bounded by --duration and --max-queries.

`

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchUsage); fs.PrintDefaults() }
	rate := fs.Float64("rate", 1000, "intended queries per second, open loop; 0: closed loop")
	workers := fs.Int("workers", 1, "closed loop: senders, each waiting for its answer")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	maxQueries := fs.Int("max-queries", 0, "stop after this many (default: rate × duration; closed loop 1,000,000)")
	maxInFlight := fs.Int("max-in-flight", 10000, "queries awaiting an answer at most; beyond, the schedule waits (and latency counts it)")
	conns := fs.Int("conns", 1, "connections the queries are spread over")
	policy := fs.String("policy", "reuse", "connections: reuse (kept, pipelined), new (one per query), resumed (one per query, TLS resumption), 0rtt (one per query, 0-RTT)")
	names := fs.String("names", "", "a query file in dnsperf's format (NAME TYPE per line); default bench.example A")
	timeout := fs.Duration("timeout", 5*time.Second, "per query")
	ca := fs.String("ca", "", "verify the server against the PEM certificates in `FILE`")
	insecure := fs.Bool("insecure", false, "do not verify the server's certificate")
	httpVersion := fs.String("http", "", "DoH over HTTP 1.1 or 2 (default 2)")
	asJSON := fs.Bool("json", false, "one JSON summary per URL")
	seed := fs.Uint64("seed", 0, "query mix order")
	steps := fs.String("steps", "", "comma-separated rates to step through, --duration each, stopping at the first not held (--p99, --max-loss)")
	ramp := fs.String("ramp", "", "START:LIMIT: step from START doubling up to LIMIT queries/s, as --steps")
	p99 := fs.Duration("p99", 50*time.Millisecond, "with --steps or --ramp: the p99 latency a rate must hold")
	maxLoss := fs.Float64("max-loss", 0.001, "with --steps or --ramp: the share of the queries due a rate may lose (unanswered, or never sent for want of room in flight)")
	storeDSN := fs.String("store", "", "also store every query (SQLite file or postgres:// URL), for doxlab report's server-load section")
	label := fs.String("label", "", "name the benchmarks in the store and the report (default: the protocol)")
	progress := fs.Bool("progress", false, "report progress every second even when standard error is not a terminal (on a terminal it always does)")
	quiet := fs.Bool("quiet", false, "no progress")
	okRcodes := okRcodesFlag(fs)
	busyPoll := fs.Bool("busy-poll", true, "while half the in-flight window awaits answers, let UDP, TCP and TLS readers poll their socket briefly before sleeping, so that a saturated server need not wake an idle generator per answer")
	full := fs.Bool("full", false, "send every query through the transport with its full record (as doxlab query does), not the lean path; costs tens of µs of CPU per query")
	cpuProfile := fs.String("cpuprofile", "", "write the client's CPU profile (pprof) to `FILE`")
	urls, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab bench: "+format+"\n", a...)
		return exitUsage
	}
	if len(urls) == 0 {
		fs.Usage()
		return exitUsage
	}
	opts, err := bench.WithPolicy(transport.Options{Timeout: *timeout, Insecure: *insecure, HTTPVersion: *httpVersion}, *policy)
	if err != nil {
		return usage("--policy: %v", err)
	}
	if *ca != "" {
		pool, err := loadCA(*ca)
		if err != nil {
			return usage("%v", err)
		}
		opts.RootCAs = pool
	}
	var mix []bench.Query
	if *names != "" {
		var err error
		if mix, err = bench.ReadQueries(*names); err != nil {
			return usage("%v", err)
		}
	}
	answers, err := parseOKRcodes(*okRcodes)
	if err != nil {
		return usage("%v", err)
	}
	var rates []float64
	switch {
	case *steps != "" && *ramp != "":
		return usage("--steps and --ramp exclude each other")
	case *steps != "":
		if rates, err = bench.ParseSteps(*steps); err != nil {
			return usage("--steps: %v", err)
		}
	case *ramp != "":
		if rates, err = bench.ParseRamp(*ramp); err != nil {
			return usage("--ramp: %v", err)
		}
	}
	bound := bench.Bound{P99: *p99, MaxLoss: *maxLoss}
	if err := bound.Check(); rates != nil && err != nil {
		return usage("--p99, --max-loss: %v", err)
	}
	if *duration <= 0 || *timeout <= 0 {
		return usage("--duration and --timeout must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfgs := make([]bench.Config, len(urls))
	for i, u := range urls {
		cfgs[i] = bench.Config{URL: u, Rate: *rate, Workers: *workers, Duration: *duration, MaxQueries: *maxQueries,
			MaxInFlight: *maxInFlight, Conns: *conns, Names: mix, Options: opts, Seed: *seed, Keep: *storeDSN != "", Full: *full,
			NoBusyPoll: !*busyPoll, Answers: answers}
		if err := cfgs[i].Check(); err != nil {
			return usage("%v", err)
		}
		if _, err := transport.New(u, opts); err != nil {
			return usage("%v", err)
		}
	}
	// The store opens before anything is sent, so an unreachable one
	// fails fast; each benchmark is stored as it ends.
	save, closeStore, code := benchStore(ctx, *storeDSN, *label, args, stderr)
	if code != exitOK {
		return code
	}
	defer closeStore()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab bench: --cpuprofile: %v\n", err)
		return exitUsage
	}
	defer stopProfile()
	exit := exitOK
	for i, u := range urls {
		cfg := cfgs[i]
		endProgress := func() {}
		if !*quiet {
			cfg.Progress, endProgress = benchProgress(stderr, u, *progress)
		}
		if rates != nil {
			exit = max(exit, benchSteps(ctx, benchURL{i: i, url: u, cfg: cfg, save: save, endProgress: endProgress, json: *asJSON, stdout: stdout, stderr: stderr}, rates, bound))
			continue
		}
		res, err := bench.Run(ctx, cfg)
		endProgress()
		if err != nil {
			fmt.Fprintf(stderr, "doxlab bench: %s: %v\n", u, err)
			exit = 1
			continue
		}
		if err := save(bench.NewRecord(fmt.Sprint(i), cfg, res, -1), res.Samples); err != nil {
			fmt.Fprintf(stderr, "doxlab bench: %s: %v\n", u, err)
			exit = 1
		}
		s := res.Summarize()
		if *asJSON {
			json.NewEncoder(stdout).Encode(s)
		} else {
			s.Write(stdout)
			fmt.Fprintln(stdout)
		}
		if s.Answered == 0 {
			exit = 1
		}
	}
	return exit
}

// benchURL is one URL's benchmark: its index among the URLs, its
// config, where it is saved and printed.
type benchURL struct {
	i              int
	url            string
	cfg            bench.Config
	save           func(bench.Record, []bench.Sample) error
	endProgress    func() // before anything is printed
	json           bool
	stdout, stderr io.Writer
}

// benchSteps runs b's steps through rates until one does not hold the
// bound, saves every step and prints them; an exit code.
func benchSteps(ctx context.Context, b benchURL, rates []float64, bound bench.Bound) int {
	exit := exitOK
	steps, held, err := bench.Steps(ctx, b.cfg, rates, bound)
	b.endProgress()
	for j, x := range steps {
		rec := bench.NewRecord(fmt.Sprintf("%d.%d", b.i, j), b.cfg, x.Result, j)
		rec.Bound, rec.Held = &bound, x.Held
		if err := b.save(rec, x.Result.Samples); err != nil {
			fmt.Fprintf(b.stderr, "doxlab bench: %s: %v\n", b.url, err)
			exit = 1
		}
	}
	if err != nil {
		fmt.Fprintf(b.stderr, "doxlab bench: %s: %v\n", b.url, err)
		return 1
	}
	if b.json {
		json.NewEncoder(b.stdout).Encode(map[string]any{"url": b.url, "steps": steps, "held_qps": held})
		return exit
	}
	writeSteps(b.stdout, b.url, b.cfg.Duration, bound, steps, held)
	return exit
}

// benchStore opens the store at dsn (none: save keeps nothing) and
// begins the run the benchmarks are saved in; closeStore closes it and
// says where they went.
func benchStore(ctx context.Context, dsn, label string, args []string, stderr io.Writer) (save func(bench.Record, []bench.Sample) error, closeStore func(), code int) {
	save = func(bench.Record, []bench.Sample) error { return nil }
	if dsn == "" {
		return save, func() {}, exitOK
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab bench: %v\n", err)
		return nil, nil, exitUsage
	}
	run := store.NewRun("bench", "", map[string]any{"args": args, "cpus": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0)})
	if err := st.BeginRun(ctx, run); err != nil {
		st.Close()
		fmt.Fprintf(stderr, "doxlab bench: %v\n", err)
		return nil, nil, 1
	}
	save = func(rec bench.Record, samples []bench.Sample) error {
		if label != "" {
			rec.Label = label
		}
		// Store even when ctx was interrupted: what was measured stays.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return bench.Save(sctx, st, run.ID, rec, samples)
	}
	return save, func() {
		fmt.Fprintf(stderr, "stored as run %s (doxlab report draws it)\n", run.ID)
		st.Close()
	}, exitOK
}

// writeSteps prints a stepped benchmark's table and the highest rate
// held.
func writeSteps(stdout io.Writer, url string, each time.Duration, b bench.Bound, steps []bench.Step, held float64) {
	fmt.Fprintf(stdout, "%s: steps of %s, held while p99 <= %s and loss <= %.2f%%\n", url, each, b.P99, 100*b.MaxLoss)
	fmt.Fprintf(stdout, "%10s %10s %10s %8s %8s %10s %10s %5s\n", "intended", "achieved", "answered", "lost", "unsent", "p50 ms", "p99 ms", "held")
	for _, x := range steps {
		lost := x.Sent - x.Answered
		fmt.Fprintf(stdout, "%10.0f %10.0f %10.0f %8d %8d %10.3f %10.3f %5v\n", x.IntendedQPS, x.AchievedQPS, x.AnsweredQPS, lost, x.Unsent, x.Latency.P["50"], x.Latency.P["99"], x.Held)
	}
	fmt.Fprintf(stdout, "highest rate held: %.0f queries/s\n\n", held)
}

// benchProgress reports a run's progress on w once a second: one line
// redrawn in place on a terminal (end erases it); plain lines otherwise
// when always is set, else nothing.
func benchProgress(w io.Writer, url string, always bool) (report func(bench.Progress), end func()) {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	if !tty && !always {
		return nil, func() {}
	}
	drawn := false
	report = func(p bench.Progress) {
		line := fmt.Sprintf("%s %5.1fs: %d sent, %d answered, %d failed, %d in flight; %.0f answers/s, p50 %.3f ms, p99 %.3f ms",
			url, p.Elapsed.Seconds(), p.Sent, p.OK, p.Failed, p.InFlight, p.Answered, ms(p.P50), ms(p.P99))
		if tty {
			fmt.Fprintf(w, "\r\x1b[K%s", line) // erase the line, then draw it anew
			drawn = true
			return
		}
		fmt.Fprintln(w, line)
	}
	end = func() {
		if drawn {
			fmt.Fprint(w, "\r\x1b[K")
		}
	}
	return report, end
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startCPUProfile writes this process's CPU profile (pprof) to path until
// stop is called; an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/doxlab/doxlab/experiment/all" // registers every experiment
	"github.com/doxlab/doxlab/internal/progress"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

// experimentUsage lists the registered experiments.
func experimentUsage() string {
	var b strings.Builder
	b.WriteString("usage: doxlab experiment NAME [flags]\n\n")
	for _, e := range experiment.Registered() {
		lines := strings.Split(e.Doc, "\n")
		if len(e.Name) < 9 {
			fmt.Fprintf(&b, "  %-9s %s\n", e.Name, lines[0])
		} else {
			fmt.Fprintf(&b, "  %s\n  %-9s %s\n", e.Name, "", lines[0])
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "  %-9s %s\n", "", l)
		}
	}
	b.WriteString("\n--quick runs each in a few minutes; 'doxlab experiment NAME --help' lists its flags.\n")
	return b.String()
}

func experimentNames() string { return strings.Join(experiment.Names(), ", ") }

// runExperiment runs a registered experiment: its shared and own flags,
// --quick, then its table from the store.
func runExperiment(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, experimentUsage())
		return exitUsage
	}
	info, ok := experiment.Lookup(args[0])
	if !ok {
		switch args[0] {
		case "-h", "--help", "help":
			fmt.Fprint(stdout, experimentUsage())
			return exitOK
		}
		fmt.Fprintf(stderr, "doxlab experiment: unknown experiment %q\n", args[0])
		fmt.Fprint(stderr, experimentUsage())
		return exitUsage
	}
	e := info.New()
	fs := newFlagSet("experiment "+info.Name, stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: doxlab experiment %s [flags]\n\n%s\n\nflags:\n", info.Name, info.Doc)
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, info.Quick)
	env := e.Environment()
	env.Flags(fs, info.Resumable)
	e.Flags(fs)
	if _, code, ok := parseArgs(fs, args[1:]); !ok {
		return code
	}
	if name := negativeFlag(fs); name != "" {
		fmt.Fprintf(stderr, "doxlab experiment %s: --%s must not be negative (leave it out for the default)\n", info.Name, name)
		return exitUsage
	}
	if env.Resume != "" {
		// A resume needs its ID and store only: the design flags left
		// unset take the values the experiment was begun with.
		if code := resumeDesign(fs, env.Store, env.Resume, "experiment "+info.Name, stderr); code != exitOK {
			return code
		}
	}
	if *quick {
		if err := experiment.ApplyQuick(e, fs); err != nil {
			fmt.Fprintf(stderr, "doxlab experiment %s: %v\n", info.Name, advise(err))
			return exitUsage
		}
	}
	loopbackProfiles(fs, env.Net)
	meter := progress.New(stderr, "measurements")
	defer meter.Done()
	env.Log, env.Progress = meter, meter.Update // log lines above the bar
	env.Design = design(fs)
	run := e.Run
	if info.Resumable {
		// The library returns the ID with its error; the hint is the CLI's.
		run = func(ctx context.Context) (string, error) {
			id, err := e.Run(ctx)
			switch {
			case errors.Is(err, experiment.ErrDesignChanged):
				err = fmt.Errorf("%w (resume with the same flags, or add --force to mix the designs anyway)", err)
			case err != nil && id != "":
				err = fmt.Errorf("%w (what was measured is stored; continue with: doxlab experiment %s --resume %s --store %s)", err, info.Name, id, env.Store)
			}
			return id, err
		}
	}
	return runAndShow(info.Name, env.Store, stderr, run, func(ctx context.Context, st *store.Store, id string) error {
		res, err := e.Load(ctx, st, id+"-")
		if err != nil {
			return err
		}
		n, unit := res.Count()
		fmt.Fprintf(stdout, "experiment %s, stored in %s: %d %s\n", id, env.Store, n, unit)
		if err := res.WriteTable(stdout); err != nil {
			return err
		}
		lcs, err := experiment.LoadLinkChecks(ctx, st, experiment.OfExperiment(id+"-"))
		if err != nil {
			return err
		}
		writeLinkChecks(stdout, lcs)
		again, err := st.Supersessions(ctx, id+"-")
		if err != nil {
			return err
		}
		for _, x := range again {
			fmt.Fprintf(stdout, "run %s measured again, as %s: %s (the first stays in the store, out of these tables)\n", x.Run, x.By, x.Why)
		}
		// The findings last, each verdict only where the data earns it.
		if f, ok := res.(experiment.Finder); ok {
			return experiment.WriteFindings(stdout, experiment.Earn(f.Findings(), experiment.EvidenceOf(lcs)))
		}
		return nil
	})
}

// negativeFlag names a number or duration the command line gave below
// zero: an experiment's config takes a value of zero or less for its
// default, so a negative one would run silently as the default.
func negativeFlag(fs *flag.FlagSet) (name string) {
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || name != "" {
			return
		}
		var neg bool
		switch v := g.Get().(type) {
		case int:
			neg = v < 0
		case int64:
			neg = v < 0
		case float64:
			neg = v < 0 || math.IsNaN(v)
		case time.Duration:
			neg = v < 0
		}
		if neg {
			name = f.Name
		}
	})
	return name
}

// loopbackProfiles makes "none" the access profile of a run on the
// loopback net, which shapes no link, where the command line named none.
func loopbackProfiles(fs *flag.FlagSet, net string) {
	if net != experiment.NetLoopback {
		return
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"profiles", "profile"} {
		if fs.Lookup(name) != nil && !set[name] {
			fs.Set(name, "none") //nolint:errcheck // "none" is a profile every experiment takes
		}
	}
}

// resumeDesign sets the design flags the command line left unset to the
// values experiment id in the store at dsn was begun with. A store that
// is not there is an error, and is not created.
func resumeDesign(fs *flag.FlagSet, dsn, id, cmd string, stderr io.Writer) int {
	ctx := context.Background()
	st, code := openExistingStore(ctx, dsn, cmd, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	stored, err := experiment.StoredDesign(ctx, st, id)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab %s: --store %s: %v\n", cmd, store.Redact(dsn), err)
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range stored {
		f := fs.Lookup(name)
		if set[name] || slices.Contains(notDesign, name) || f == nil || f.Value.String() == v {
			continue // what the user says wins (BeginRun compares); flags gone since, and values as they are, are left
		}
		if err := fs.Set(name, v); err != nil {
			fmt.Fprintf(stderr, "doxlab %s: the stored design's --%s %q: %v\n", cmd, name, v, err)
			return 1
		}
	}
	return exitOK
}

// notDesign are the flags that say how or where an experiment runs, not
// what it measures: a resume may change them.
var notDesign = []string{"store", "resume", "force", "low-latency", "netlog", "pcap", "browser", "keep", "quick", "seed"}

// design is what an experiment measures: its flags' values, by name.
func design(fs *flag.FlagSet) map[string]string {
	out := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(notDesign, f.Name) {
			out[f.Name] = f.Value.String()
		}
	})
	return out
}

// writeLinkChecks says how the emulated links held during the runs: one
// line, or a line per check that failed.
func writeLinkChecks(w io.Writer, lcs []*experiment.LinkCheck) {
	if len(lcs) == 0 {
		return
	}
	bad, loopback := 0, 0
	worst := 0.0
	for _, lc := range lcs {
		if lc.Net == experiment.NetLoopback {
			loopback++
			continue
		}
		worst = max(worst, lc.ErrP99Us)
		if !lc.OK {
			bad++
			fmt.Fprintf(w, "link check FAILED, run %s (%s, %s): %s\n", lc.Run, lc.Profile, lc.When, lc.Why)
		}
	}
	if loopback > 0 {
		fmt.Fprintf(w, "links: none emulated (the loopback net): %d checks measured nothing, and no claim about time rests on these runs\n", loopback)
	}
	if n := len(lcs) - loopback; n > 0 && bad == 0 {
		fmt.Fprintf(w, "links: %d checks before and after the runs held (rates ≥ %.0f%% of the profiles', RTT error p99 ≤ %.0f µs)\n", n, 100*experiment.MinRateShare, worst)
	}
}

// runAndShow runs an experiment until done or interrupted, then prints
// what the store holds of it, also when it stopped early: samples
// already measured are kept and shown. show reads them from the store.
func runAndShow(name, dsn string, stderr io.Writer, run func(context.Context) (string, error), show func(ctx context.Context, st *store.Store, id string) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id, err := run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab experiment %s: %v\n", name, advise(err))
		switch {
		case errors.Is(err, experiment.ErrBadDesign):
			return exitUsage
		case id == "" || errors.Is(err, experiment.ErrDesignChanged):
			return 1 // nothing of this run to show
		}
	}
	st, err2 := store.Open(context.Background(), dsn)
	if err2 == nil {
		defer st.Close()
		err2 = show(context.Background(), st, id)
	}
	if err2 != nil {
		fmt.Fprintf(stderr, "doxlab experiment %s: %v\n", name, advise(err2))
		return 1
	}
	if err != nil {
		return 1
	}
	return exitOK
}

// storeFlag is the experiments' --store; they resume from it too.
func storeFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "store", "doxlab.db", "the store (SQLite file or postgres:// URL)")
}

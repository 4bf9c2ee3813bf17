// Package experiment is the shape every experiment has: a config that
// embeds Env and implements Experiment, registered once, which the CLI,
// export and report iterate; and the helpers they share. Each experiment
// is a folder below (dnsrtt, web, coalescing, hol, amplification,
// overhead, privacy, serverload); package all registers them all, in its
// Order.
package experiment

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// Env is what every experiment shares: where its results go, which
// experiment to continue, the testbed's latency mode and a log. Each
// experiment's config embeds it.
type Env struct {
	Store      string    // SQLite file or postgres:// URL; default doxlab.db
	Resume     string    // an experiment ID to continue, measuring only what is not stored; it must be in the store
	LowLatency bool      // testbed.Spec.LowLatency
	Log        io.Writer // progress; default none
	// Design is what the experiment measures (the CLI's flags, by name),
	// recorded with its runs: a resume with another is refused unless
	// Force, which the run then records. Nil: not checked.
	Design map[string]string
	Force  bool
	// Progress, if set, hears how far the run is: done of total
	// measurements (queries, loads, handshakes), those a resumed run
	// finds stored counted done. The CLI draws it with a rate and an ETA.
	Progress func(done, total int)

	progressMu  sync.Mutex
	done, total int
}

// Plan adds n measurements to the run's total.
func (e *Env) Plan(n int) { e.advance(0, n) }

// Advance counts n measurements done (or found stored).
func (e *Env) Advance(n int) { e.advance(n, 0) }

func (e *Env) advance(done, total int) {
	e.progressMu.Lock()
	e.done, e.total = e.done+done, e.total+total
	d, t := e.done, e.total
	e.progressMu.Unlock()
	if e.Progress != nil {
		e.Progress(d, t)
	}
}

// Environment returns the Env itself, so that every config that embeds
// one satisfies Experiment's Environment.
func (e *Env) Environment() *Env { return e }

// Defaults fills in Env's defaults.
func (e *Env) Defaults() {
	if e.Store == "" {
		e.Store = "doxlab.db"
	}
	if e.Log == nil {
		e.Log = io.Discard
	}
}

// Flags binds the flags every experiment takes: --store, --resume and
// --low-latency.
func (e *Env) Flags(fs *flag.FlagSet, resumable bool) {
	fs.StringVar(&e.Store, "store", "doxlab.db", "the store (SQLite file or postgres:// URL)")
	if resumable {
		fs.StringVar(&e.Resume, "resume", "", "continue the experiment with this `ID` (exactly, as printed when it started)")
		fs.BoolVar(&e.Force, "force", false, "with --resume: continue even though the design flags differ from the stored ones (recorded with the run)")
	}
	fs.BoolVar(&e.LowLatency, "low-latency", false, "keep every CPU from halting while the testbed runs (see testbed up --low-latency), for VMs slow to wake a halted vCPU")
}

// Experiment is one of the papers' experiments: a config that binds its
// own flags, shrinks itself to a quick run, runs on the testbed storing
// every sample, and loads what runs stored: the CLI writes its text
// table, the report its section.
type Experiment interface {
	// Environment is the config's shared part.
	Environment() *Env
	// Flags binds the experiment's own flags to its config.
	Flags(fs *flag.FlagSet)
	// Quick makes the config a run of a few minutes.
	Quick()
	// Run runs the experiment and returns its ID, the prefix of its runs;
	// on an error after the ID was chosen, the ID too, so the caller can
	// show what was stored and say how to continue.
	Run(ctx context.Context) (string, error)
	// Load reads what the runs whose IDs start with prefix stored ("" for
	// every run of this experiment).
	Load(ctx context.Context, st *store.Store, prefix string) (Results, error)
}

// Info registers an experiment.
type Info struct {
	Name  string // as on the command line: dns-rtt
	Doc   string // what it measures, for help: a few lines
	Quick string // what --quick runs
	// Resumable experiments take --resume.
	Resumable bool
	// Method is the version of the experiment's method, from 1, stored
	// with each run: raised when what a run measures, or how, changes
	// (a check added to a verdict, a sample's definition, a default of
	// the design), so a store that mixes the two can say so; a code
	// change that keeps the numbers keeps it. The experiment's README
	// says what each version changed.
	Method int
	New    func() Experiment // a config with its zero values
}

var (
	registryMu sync.Mutex
	order      []string // SetOrder's
	registry   []Info
)

// Register adds an experiment; a name registered twice panics, at init.
func Register(i Info) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if slices.ContainsFunc(registry, func(r Info) bool { return r.Name == i.Name }) {
		panic("experiment " + i.Name + " registered twice")
	}
	if i.Method < 1 {
		panic("experiment " + i.Name + " declares no method version")
	}
	registry = append(registry, i)
}

// MethodOf is the method version of the experiment whose runs are of
// kind ("experiment:web"); 0 for a kind no experiment registered.
func MethodOf(kind string) int {
	name, ok := strings.CutPrefix(kind, "experiment:")
	if !ok {
		return 0
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, r := range registry {
		if r.Name == name {
			return r.Method
		}
	}
	return 0
}

// SetOrder sets the order experiments are listed in (package all holds
// it: the papers' method's order); one not named comes after, by name.
func SetOrder(names ...string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	order = slices.Clone(names)
}

// Registered lists the experiments in SetOrder's order.
func Registered() []Info {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := slices.Clone(registry)
	at := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Or(cmp.Compare(at(a.Name), at(b.Name)), cmp.Compare(a.Name, b.Name)) })
	return out
}

// Lookup finds a registered experiment.
func Lookup(name string) (Info, bool) {
	for _, i := range Registered() {
		if i.Name == name {
			return i, true
		}
	}
	return Info{}, false
}

// Names lists the registered experiments' names.
func Names() []string {
	var out []string
	for _, i := range Registered() {
		out = append(out, i.Name)
	}
	return out
}

// listValue is a comma-separated list flag; setting it replaces the list.
type listValue struct{ p *[]string }

func (l listValue) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listValue) Set(s string) error {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	*l.p = out
	return nil
}

// ListVar binds a comma-separated list flag to p, with def as default.
func ListVar(fs *flag.FlagSet, p *[]string, name string, def []string, usage string) {
	*p = slices.Clone(def)
	fs.Var(listValue{p}, name, usage)
}

// CheckValues says which of a list flag's values is not one allowed:
// "h3 mode \"2rtt\" is not 1rtt or 0rtt".
func CheckValues(what string, values []string, allowed ...string) error {
	for _, v := range values {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("%s %q is not %s", what, v, protocol.OneOf(allowed))
		}
	}
	return nil
}

// ApplyQuick shrinks e to a quick run, keeping what the command line
// set explicitly: an explicit --repeat wins over --quick's.
func ApplyQuick(e Experiment, fs *flag.FlagSet) error {
	explicit := map[string]string{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = f.Value.String() })
	e.Quick()
	for name, v := range explicit {
		if f := fs.Lookup(name); f != nil && f.Value.String() != v {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
		}
	}
	return nil
}

// Start opens the store first, so that an unreachable store fails before
// a testbed is built, then starts the testbed with spec and Env's latency
// mode, its emulator in a process of its own. done closes both, the testbed first.
func (e *Env) Start(ctx context.Context, spec testbed.Spec) (st *store.Store, tb *testbed.Testbed, done func(), err error) {
	if st, err = store.Open(ctx, e.Store); err != nil {
		return nil, nil, nil, err
	}
	// An experiment to resume must be stored: a mistyped ID measures
	// nothing rather than everything again.
	if err := e.checkResume(ctx, st); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	spec.LowLatency = e.LowLatency
	// The emulator in a process of its own: the experiment's servers,
	// loaders and store allocate, and their garbage collection would stop
	// the links for milliseconds at a time.
	spec.Separate = true
	if tb, err = testbed.Start(spec); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return st, tb, func() { tb.Close(); st.Close() }, nil
}

// Results is what Load read of an experiment's runs: it knows how to
// summarize itself as a text table and as a section of the report.
type Results interface {
	// Count is how much was loaded, and of what: 32, "page loads".
	Count() (n int, unit string)
	// WriteTable writes the summary as a text table.
	WriteTable(w io.Writer) error
	// Section draws the figures into dir and returns the report's
	// section.
	Section(dir string) (*Section, error)
}

// Sectioner is Results that make more than one section of the report
// (the web experiment's testbed loads and campaigns' loads in the wild).
type Sectioner interface {
	Sections(dir string) ([]*Section, error)
}

// Section is an experiment's part of the HTML report.
type Section struct {
	ID      string        // the page's anchor: "hol"
	Title   string        // "Head-of-line blocking"
	Intro   template.HTML // what the table and figures show
	Table   template.HTML // the summary, one HTML table
	Figures []figure.Figure
	Files   []string // the figures' files: SVG, PDF and PNG at both widths
}

// NewSection renders table (an html/template with figure.Funcs) with
// data, and takes the figures of set.
func NewSection(id, title string, intro template.HTML, table *template.Template, data any, set *figure.Set) (*Section, error) {
	var b strings.Builder
	if table != nil {
		if err := table.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("%s table: %w", id, err)
		}
	}
	s := &Section{ID: id, Title: title, Intro: intro, Table: template.HTML(b.String())}
	if set != nil {
		s.Figures, s.Files = set.Figures, set.Files()
	}
	return s, nil
}

// Table parses an HTML table template with figure.Funcs; it panics on an
// error, at init.
func Table(name, text string) *template.Template {
	return template.Must(template.New(name).Funcs(figure.Funcs).Parse(text))
}

// RunAndLoad runs e and loads what its run stored, for callers that want
// the results in hand (tests, scripts) rather than a table.
func RunAndLoad(ctx context.Context, e Experiment) (Results, error) {
	id, err := e.Run(ctx)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, e.Environment().Store)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return e.Load(ctx, st, id+"-")
}

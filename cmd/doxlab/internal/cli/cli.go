// Package cli is doxlab's command line: each subcommand is a thin adapter
// over a library package.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/internal/suggest"
	"github.com/doxlab/doxlab/testbed"
)

// Exit codes shared by all subcommands. Measurement outcomes get their own
// codes (see queryExit) so scripts can tell a timeout from a bad certificate.
const (
	exitOK    = 0
	exitUsage = 2
)

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"query", "send DNS queries over any transport and show timings and connection facts", runQuery},
		{"measure", "response times the PAM 2022 way: warm-up, measured query on a fresh connection, RTT probe", runMeasure},
		{"campaign", "run a measurement campaign from a YAML spec, stored and resumable; or plan one for workers at many vantage points", runCampaign},
		{"worker", "take one vantage point's jobs of planned campaigns from a PostgreSQL store and measure them", runWorker},
		{"load", "load one page with doxlab's own page loader (HTTP/3 or HTTP/2, DNS over any transport), or capture its dependency graph from Chromium", runLoad},
		{"bench", "load a server over any transport, open loop (latency from each query's intended send time) or closed loop", runBench},
		{"experiment", "run one of the papers' experiments on the testbed: " + experimentNames(), runExperiment},
		{"export", "write stored samples as CSV or Parquet", runExport},
		{"store", "what a store holds and costs on disk (stats)", runStore},
		{"report", "render stored samples as CDFs (PNG, SVG), a summary table and one HTML page", runReport},
		{"scan", "find QUIC (DoQ) and Do53 services across address ranges, rate-limited, honouring blocklists", runScan},
		{"verify", "verify DoQ candidates: handshake with every version and ALPN, a real query, certificate, Retry, NEW_TOKEN, 0-RTT", runVerify},
		{"survey", "tabulate stored verifications: DoQ versions and ALPNs, DoT support, DoH endpoints, HTTP and TLS versions", runSurvey},
		{"probe", "measure the RTT on a server's port and protocol (UDP, TCP SYN, QUIC Version Negotiation)", runProbe},
		{"serve", "serve DNS over UDP, TCP, DoT, DoH/1.1/2/3 and DoQ, and web pages over HTTP/3", runServe},
		{"testbed", "network namespaces joined by an emulated access link (up, down, status, exec, profile, check)", runTestbed},
		{"version", "print doxlab's version", runVersion},
	}
}

// Main runs doxlab with args (without the program name) and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if isHelp(args[0]) {
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(args[1:], stdout, stderr)
	}
	var names []string
	for _, c := range commands() {
		if c.name == args[0] {
			out := &checkedWriter{w: stdout}
			var code int
			if slices.ContainsFunc(beforeDashes(args[1:]), isHelp) {
				// Help is the answer asked for: on standard output, exit 0,
				// whatever the command's own usage writes to.
				code = c.run(args[1:], out, out)
			} else {
				code = c.run(args[1:], out, stderr)
			}
			if out.err != nil && code == exitOK {
				fmt.Fprintf(stderr, "doxlab %s: writing its output: %v\n", c.name, out.err)
				return 1
			}
			return code
		}
		names = append(names, c.name)
	}
	msg := fmt.Sprintf("doxlab: unknown command %q", args[0])
	if near := suggest.Nearest(args[0], names, 1, true); len(near) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", near[0])
	}
	fmt.Fprintln(stderr, msg+"; 'doxlab help' lists them")
	return exitUsage
}

// checkedWriter is a command's standard output, keeping its first write
// error: output lost to a full disk is the command's failure, whatever
// the command did with the error (a JSON encoder's, a table's, a line
// printed and not checked), not an exit 0 with a file cut short.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// outFile is the file a command's standard output writes to, if it is
// one: exec becomes its command only when its output is the process's.
func outFile(w io.Writer) *os.File {
	if c, ok := w.(*checkedWriter); ok {
		w = c.w
	}
	f, _ := w.(*os.File)
	return f
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

// beforeDashes is args up to a "--".
func beforeDashes(args []string) []string {
	if i := slices.Index(args, "--"); i >= 0 {
		return args[:i]
	}
	return args
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: doxlab COMMAND [flags] [args]   (doxlab --version: which doxlab this is)")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	if slices.ContainsFunc(args, isHelp) {
		fmt.Fprintln(stdout, "usage: doxlab version (or doxlab --version)\n\nprints doxlab's version, whether it is a release or a development build, the commit it was built from, and the Go toolchain and platform")
		return exitOK
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "doxlab version: takes no arguments, got %q\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, buildinfo.Describe())
	return exitOK
}

// newFlagSet is a flag set that reports to stderr and returns errors,
// with the usage format every command shares; a command with more to say
// sets its own Usage in the same format.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: doxlab %s [flags]\n\nflags:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// advise adds to a library's error what to do about it on the command
// line: the libraries name no command or flag, the CLI does.
func advise(err error) error {
	var up *testbed.UpError
	switch {
	case errors.As(err, &up):
		return fmt.Errorf("%w; run 'doxlab testbed down --name %s' first", err, up.Name)
	case errors.Is(err, corpus.ErrNoGraph):
		return fmt.Errorf("%w: capture one with doxlab load --capture", err)
	case errors.Is(err, campaign.ErrNeedPostgres):
		return fmt.Errorf("%w (--store postgres://...); on one machine, 'doxlab campaign run' measures into SQLite", err)
	}
	return err
}

// advised is a's errors advised.
func advised(a []any) []any {
	for i, v := range a {
		if err, ok := v.(error); ok {
			a[i] = advise(err)
		}
	}
	return a
}

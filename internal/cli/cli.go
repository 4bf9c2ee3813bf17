// Package cli is doxlab's command line: each subcommand is a thin adapter
// over a library package.
package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/doxlab/doxlab/internal/buildinfo"
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
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "doxlab: unknown command %q (run 'doxlab help')\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: doxlab COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "doxlab", buildinfo.Version())
	return exitOK
}

// newFlagSet is a flag set that reports to stderr and returns errors.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

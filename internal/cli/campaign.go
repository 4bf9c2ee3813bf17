package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/term"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

const campaignUsage = `usage: doxlab campaign run SPEC.yaml [--store DSN] [--run ID] [--json] [--out FILE]

Runs a measurement campaign described in YAML (see measure.Campaign):
targets × transports × conditions × repetitions, stored as it goes. A spec
with an error is rejected before anything runs, naming file, line and
field. A run that stopped continues with --run ID.
`

func runCampaign(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, campaignUsage)
		return exitOK
	}
	if len(args) < 2 || args[0] != "run" {
		fmt.Fprint(stderr, campaignUsage)
		return exitUsage
	}
	fs := newFlagSet("campaign run", stderr)
	storeDSN := fs.String("store", "", "the store (default: the spec's store, else doxlab.db)")
	runID := fs.String("run", "", "continue this run")
	asJSON := fs.Bool("json", false, "print every sample as a JSON line")
	outPath := fs.String("out", "", "also write every sample as JSON lines to `FILE`")
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil || len(pos) != 1 {
		fmt.Fprint(stderr, campaignUsage)
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab campaign: "+format+"\n", a...)
		return exitUsage
	}
	c, err := measure.LoadCampaign(pos[0])
	if err != nil {
		return fail("%v", err)
	}
	targets := c.Targets
	if c.TargetsFile != "" {
		more, err := measure.ReadTargets(c.TargetsFile)
		if err != nil {
			return fail("%v", err)
		}
		targets = append(targets, more...)
	}
	spec := measure.Spec{Targets: targets, Transports: c.Transports, Conditions: c.Conditions, Name: c.Query.Name,
		Repeat: c.Repeat, Timeout: c.Timeout, Retries: c.Retries, Concurrency: c.Concurrency, Rate: c.Rate, Seed: c.Seed,
		Options: transport.Options{Insecure: c.TLS.Insecure, SNI: c.TLS.SNI}}
	if c.Query.Type != "" {
		spec.Type = dns.StringToType[strings.ToUpper(c.Query.Type)]
	}
	if c.Query.RD != nil {
		spec.NoRD = !*c.Query.RD
	}
	if c.TLS.CA != "" {
		if spec.Options.RootCAs, err = loadCA(c.TLS.CA); err != nil {
			return fail("%v", err)
		}
	}
	if _, err := spec.Tasks(); err != nil {
		return fail("%s: %v", pos[0], err)
	}
	dsn := *storeDSN
	if dsn == "" {
		dsn = c.Store
	}
	if dsn == "" {
		dsn = "doxlab.db"
	}
	return runMeasurement(spec, measureRun{store: dsn, runID: *runID, kind: "campaign", json: *asJSON, out: *outPath}, stdout, stderr)
}

// newProgress reports progress on w: a bar redrawn in place with rate and
// ETA on a terminal, a plain line every tenth of the way otherwise.
func newProgress(w io.Writer) func(done, total int) {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	start := time.Now()
	var mu sync.Mutex
	lastTenth := -1
	return func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		el := time.Since(start)
		rate := float64(done) / el.Seconds()
		eta := time.Duration(0)
		if rate > 0 {
			eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
		}
		if tty {
			const width = 30
			n := width * done / max(total, 1)
			fmt.Fprintf(w, "\r[%s%s] %d/%d %.1f/s ETA %v ", strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total, rate, eta)
			if done == total {
				fmt.Fprintln(w)
			}
			return
		}
		if tenth := 10 * done / max(total, 1); tenth != lastTenth {
			lastTenth = tenth
			fmt.Fprintf(w, "progress: %d/%d tasks, %.1f/s, ETA %v\n", done, total, rate, eta)
		}
	}
}

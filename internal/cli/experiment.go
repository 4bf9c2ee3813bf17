package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

const experimentUsage = `usage: doxlab experiment NAME [flags]

  dns-rtt   the RTT-normalised DNS exchange: per access profile, transport and
            condition, the PAM 2022 measurement on the testbed; --quick runs
            in a few minutes

`

func runExperiment(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "dns-rtt" {
		fmt.Fprint(stderr, experimentUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("experiment dns-rtt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c experiment.DNSRTT
	quick := fs.Bool("quick", false, "3 lookups per cell instead of 20")
	profiles := fs.String("profiles", "fiber,cable,dsl,4g,4g-medium", "access profiles")
	transports := fs.String("transports", "udp,tcp,dot,doh2,doh3,doq", "transports")
	conditions := fs.String("conditions", "fresh,resumed,0rtt", "conditions")
	fs.IntVar(&c.Repeat, "repeat", 20, "lookups per profile, transport and condition")
	fs.StringVar(&c.Store, "store", "doxlab.db", "the store (SQLite file or postgres:// URL)")
	fs.StringVar(&c.Resume, "resume", "", "continue the experiment with this ID")
	if _, err := parseInterleaved(fs, args[1:]); err != nil {
		return exitUsage
	}
	c.Profiles, c.Transports, c.Conditions = splitList(*profiles), splitList(*transports), splitList(*conditions)
	if *quick {
		c.Quick()
	}
	c.Log = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id, err := c.Run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab experiment dns-rtt: %v\n", err)
		return 1
	}
	st, err := store.Open(ctx, c.Store)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab experiment dns-rtt: %v\n", err)
		return 1
	}
	defer st.Close()
	sums, err := experiment.Summarize(ctx, st, id)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab experiment dns-rtt: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "experiment %s, stored in %s; medians in RTTs of the probe, and the total in RTTs of the profile\n", id, c.Store)
	fmt.Fprintf(stdout, "%-10s %-6s %-8s %6s %9s %8s %8s %8s %8s %7s\n", "profile", "transp", "cond", "ok", "handshake", "resolve", "total", "total/em", "expected", "excess")
	for _, s := range sums {
		fmt.Fprintf(stdout, "%-10s %-6s %-8s %3d/%-2d %9.2f %8.2f %8.2f %8.2f %8.0f %+7.2f\n", s.Profile, s.Transport, s.Condition, s.OK, s.N, s.Handshake, s.Resolve, s.Total, s.TotalEmulated, s.Expected, s.Total-s.Expected)
	}
	fmt.Fprintln(stdout, "total/em divides by the profile's RTT; on slow uplinks the QUIC probe (a 1200-octet Initial) is itself slowed, and total understates the excess")
	return exitOK
}

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/web"
)

const experimentUsage = `usage: doxlab experiment NAME [flags]

  dns-rtt   the RTT-normalised DNS exchange: per access profile, transport and
            condition, the PAM 2022 measurement on the testbed
  web       page loads in Chromium over HTTP/3 (0-RTT and 1-RTT) with the
            browser's DNS through a stub over each transport, per profile
  hol       head-of-line blocking: Poisson queries over one connection per
            transport, one answer in 25 delayed by 1 s, and the knock-on
            delay the other queries suffer
  overhead  bytes and packets per resolution by transport and connection
            mode, each octet attributed to a layer from a link capture
  amplification
            the DoQ handshake in RTTs per certificate size, key share and
            address validation (none, Retry, NEW_TOKEN), and from qlog
            whether the server stalled at QUIC's amplification limit

--quick runs either in a few minutes.
`

// experiments are the subcommands of 'doxlab experiment', in the order
// of the usage text.
var experiments = []struct {
	name string
	run  func(args []string, stdout, stderr io.Writer) int
}{
	{"dns-rtt", runDNSRTT},
	{"web", runWeb},
	{"hol", runHOL},
	{"overhead", runOverhead},
	{"amplification", runAmplification},
}

func experimentNames() string {
	var names []string
	for _, e := range experiments {
		names = append(names, e.name)
	}
	return strings.Join(names, ", ")
}

func runExperiment(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, experimentUsage)
		return exitUsage
	}
	for _, e := range experiments {
		if e.name == args[0] {
			return e.run(args[1:], stdout, stderr)
		}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, experimentUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "doxlab experiment: unknown experiment %q\n", args[0])
	fmt.Fprint(stderr, experimentUsage)
	return exitUsage
}

func runDNSRTT(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("experiment dns-rtt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c experiment.DNSRTT
	quick := fs.Bool("quick", false, "3 lookups per cell instead of 20")
	profiles := fs.String("profiles", "fiber,cable,dsl,4g,4g-medium", "access profiles")
	transports := fs.String("transports", strings.Join(protocol.Default(), ","), "transports")
	conditions := fs.String("conditions", "fresh,resumed,0rtt", "conditions")
	fs.IntVar(&c.Repeat, "repeat", 20, "lookups per profile, transport and condition")
	storeFlag(fs, &c.Store)
	resumeFlag(fs, &c.Resume)
	lowLatencyFlag(fs, &c.LowLatency)
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	c.Profiles, c.Transports, c.Conditions = splitList(*profiles), splitList(*transports), splitList(*conditions)
	if *quick {
		c.Quick()
	}
	c.Log = stderr
	return runAndShow("dns-rtt", c.Store, stderr, c.Run, func(ctx context.Context, st *store.Store, id string) error {
		sums, err := experiment.Summarize(ctx, st, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "experiment %s, stored in %s; medians in RTTs of the probe, and the total in RTTs of the profile\n", id, c.Store)
		fmt.Fprintf(stdout, "%-10s %-6s %-8s %6s %9s %8s %8s %8s %8s %7s %7s %7s\n", "profile", "transp", "cond", "ok", "handshake", "resolve", "total", "total/em", "expected", "excess", "serial", "rest")
		for _, s := range sums {
			fmt.Fprintf(stdout, "%-10s %-6s %-8s %3d/%-2d %9.2f %8.2f %8.2f %8.2f %8.0f %+7.2f %7.2f %+7.2f\n", s.Profile, s.Transport, s.Condition, s.OK, s.N, s.Handshake, s.Resolve, s.Total, s.TotalEmulated, s.Expected, s.Total-s.Expected,
				s.Serialization, s.TotalEmulated-s.Expected-s.Serialization)
		}
		fmt.Fprintln(stdout, "total/em divides by the profile's RTT; on slow uplinks the QUIC probe (a 1200-octet Initial) is itself slowed, and total understates the excess")
		fmt.Fprintln(stdout, "serial = the exchange's packets (bytes and packets at the socket, plus IP and UDP/TCP headers) passing the profile's rate limits, in RTTs of the profile, an upper bound since what the connection carries after the answer (ACKs, tickets) counts too; rest = total/em - expected - serial: the hosts' share (crypto, processing, pacing, delayed ACKs)")
		return nil
	})
}

func runWeb(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("experiment web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c experiment.Web
	quick := fs.Bool("quick", false, "fiber and 4g, 2 loads per cell")
	profiles := fs.String("profiles", "", "access profiles (default fiber,cable,dsl,4g,4g-medium; with --quick fiber,4g)")
	transports := fs.String("transports", "udp,doh2,doq", "the stub's DNS transports: "+strings.Join(protocol.Default(), ", "))
	h3 := fs.String("h3", "1rtt,0rtt", "HTTP/3 handshakes: 1rtt (ticket dropped), 0rtt (ticket kept)")
	pages := fs.String("pages", "example,wiki,insta", "corpus pages")
	var snapshots stringList
	fs.Var(&snapshots, "snapshot", "a directory of a page's files (index.html and what it loads) to add to the corpus; repeatable")
	stub := fs.String("stub", "cold", "the stub's connection states: cold (a new connection per query), warm (kept from the warm-up)")
	dnsModes := fs.String("dns", "stub", "stub (DNS in the browser's path), decoupled (measured apart and added, as the paper did), or both")
	fs.IntVar(&c.Repeat, "repeat", 10, "loads per cell")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "per page load")
	fs.Uint64Var(&c.Seed, "seed", 0, "task order (0: random)")
	storeFlag(fs, &c.Store)
	resumeFlag(fs, &c.Resume)
	lowLatencyFlag(fs, &c.LowLatency)
	fs.StringVar(&c.Browser, "browser", "", "the Chromium binary (default chromium on PATH)")
	fs.StringVar(&c.NetLogDir, "netlog", "", "a directory for Chromium's NetLogs")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	c.Profiles, c.Transports, c.H3, c.Pages = splitList(*profiles), splitList(*transports), splitList(*h3), splitList(*pages)
	c.Snapshots, c.StubStates, c.DNSModes = snapshots, splitList(*stub), splitList(*dnsModes)
	if *quick {
		rep, set := c.Repeat, false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "repeat" })
		c.Quick()
		if set {
			c.Repeat = rep // an explicit --repeat wins
		}
	}
	c.Log = stderr
	start := time.Now()
	return runAndShow("web", c.Store, stderr, c.Run, func(ctx context.Context, st *store.Store, id string) error {
		loads, err := st.Loads(ctx, id+"-")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "experiment %s, stored in %s: %d page loads; medians in ms, relative to DoUDP + H3 1-RTT\n", id, c.Store, len(loads))
		fmt.Fprintf(stdout, "%-9s %-10s %-8s %-5s %-5s %-4s %6s %8s %8s %7s %8s %8s %6s %6s\n", "dns-mode", "profile", "page", "dns", "stub", "h3", "ok", "PLT", "FCP", "DNS", "ΔPLT %", "ΔFCP %", "0-RTT", "resum")
		for _, x := range web.Summarize(loads) {
			fmt.Fprintf(stdout, "%-9s %-10s %-8s %-5s %-5s %-4s %3d/%-2d %8.1f %8.1f %7.1f %+8.1f %+8.1f %5.0f%% %5.0f%%\n", x.DNSMode, x.Profile, x.Page, x.Transport, x.StubState, x.H3,
				x.OK, x.N, x.PLT, x.FCP, x.DNS, x.RelPLT, x.RelFCP, 100*x.Real0RTT, 100*x.Resumed)
		}
		n := 0
		for _, x := range loads {
			if x.Start.After(start) {
				n++
			}
		}
		el := time.Since(start)
		fmt.Fprintf(stdout, "%.1f measured page loads per minute (each after a warm-up load): %d in %.0f s, testbed and browser start included\n", float64(n)/el.Minutes(), n, el.Seconds())
		return nil
	})
}

func runHOL(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("experiment hol", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c experiment.HOL
	quick := fs.Bool("quick", false, "40 queries at 20/s with one in 10 delayed, per run")
	profiles := fs.String("profiles", "none", "access profiles (none: no emulated delay, as the paper)")
	transports := fs.String("transports", strings.Join(experiment.HOLTransports, ","), "transports; -inorder: the TCP or DoT server answers in query order")
	fs.IntVar(&c.Queries, "queries", 100, "queries per run")
	fs.Float64Var(&c.Rate, "rate", 10, "mean Poisson arrivals per second")
	fs.IntVar(&c.DelayEvery, "delay-every", 25, "the server delays one answer in this many")
	fs.DurationVar(&c.Delay, "delay", time.Second, "by this much")
	fs.Uint64Var(&c.Seed, "seed", 0, "names and arrival times (0: random)")
	storeFlag(fs, &c.Store)
	resumeFlag(fs, &c.Resume)
	lowLatencyFlag(fs, &c.LowLatency)
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	c.Profiles, c.Transports = splitList(*profiles), splitList(*transports)
	if *quick {
		c.Queries, c.Rate, c.DelayEvery = 40, 20, 10
	}
	c.Log = stderr
	return runAndShow("hol", c.Store, stderr, c.Run, func(ctx context.Context, st *store.Store, id string) error {
		qs, err := experiment.LoadHOL(ctx, st, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "experiment %s, stored in %s: %d queries; knock-on: not delayed itself, but slower than the baseline median by more than %.0f ms\n", id, c.Store, len(qs), experiment.KnockOnThreshold)
		fmt.Fprintf(stdout, "%-10s %-12s %12s %8s %8s %12s %10s %7s\n", "profile", "transport", "baseline ms", "delayed", "knock-on", "sum ms", "max ms", "failed")
		for _, s := range experiment.SummarizeHOL(qs) {
			fmt.Fprintf(stdout, "%-10s %-12s %12.2f %8d %8d %12.0f %10.0f %7d\n", s.Profile, s.Transport, s.BaselineMedian, s.DelayedOwn, s.KnockOn, s.KnockOnSumMs, s.KnockOnMaxMs, s.Failed)
		}
		return nil
	})
}

func runAmplification(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("experiment amplification", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c experiment.Amplification
	quick := fs.Bool("quick", false, "3 handshakes per cell")
	profile := fs.String("profile", "", "access profile (default: 40 ms RTT and no rate limit)")
	certs := fs.String("certs", "small,large", "certificate chains: small (one ECDSA certificate), large")
	shares := fs.String("key-shares", "pq,classic", "client key shares: pq (X25519MLKEM768, two Initials), classic (X25519, one)")
	validations := fs.String("validation", "none,retry,token", "address validation: none, retry (Retry always), token (NEW_TOKEN)")
	fs.IntVar(&c.Repeat, "repeat", 10, "handshakes per cell")
	fs.IntVar(&c.LargeCertOctets, "large-cert-octets", 8000, "the large chain's size")
	storeFlag(fs, &c.Store)
	resumeFlag(fs, &c.Resume)
	lowLatencyFlag(fs, &c.LowLatency)
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	if *profile != "" {
		p, err := testbed.LookupProfile(*profile)
		if err != nil {
			fmt.Fprintf(stderr, "doxlab experiment amplification: %v\n", err)
			return exitUsage
		}
		c.Profile = p
	}
	c.CertSizes, c.KeyShares, c.Validations = splitList(*certs), splitList(*shares), splitList(*validations)
	if *quick {
		c.Repeat = 3
	}
	c.Log = stderr
	return runAndShow("amplification", c.Store, stderr, c.Run, func(ctx context.Context, st *store.Store, id string) error {
		ss, err := experiment.LoadAmplification(ctx, st, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "experiment %s, stored in %s: %d DoQ handshakes; medians; a stall is a pause over half an RTT within the server's handshake flight (client qlog)\n", id, c.Store, len(ss))
		fmt.Fprintf(stdout, "%-6s %7s %-8s %-6s %6s %14s %10s %13s %13s %8s %6s %6s\n", "cert", "octets", "share", "valid.", "ok", "handshake RTTs", "total ms", "client 1st B", "server 1st B", "stalled", "retry", "token")
		for _, x := range experiment.SummarizeAmplification(ss) {
			fmt.Fprintf(stdout, "%-6s %7d %-8s %-6s %3d/%-2d %14.2f %10.1f %13.0f %13.0f %7.0f%% %5.0f%% %5.0f%%\n", x.Cert, x.CertOctets, x.KeyShare, x.Validation, x.OK, x.N,
				x.HandshakeRTTs, x.TotalMs, x.ClientFirstFlight, x.ServerFirstBurst, 100*x.Stalled, 100*x.Retried, 100*x.Token)
		}
		return nil
	})
}

// runAndShow runs an experiment until done or interrupted, then prints
// what the store holds of it, also when it stopped early: samples
// already measured are kept and shown. show reads them from the store.
func runAndShow(name, dsn string, stderr io.Writer, run func(context.Context) (string, error), show func(ctx context.Context, st *store.Store, id string) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id, err := run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab experiment %s: %v\n", name, err)
		if id == "" {
			return 1
		}
	}
	st, err2 := store.Open(context.Background(), dsn)
	if err2 == nil {
		defer st.Close()
		err2 = show(context.Background(), st, id)
	}
	if err2 != nil {
		fmt.Fprintf(stderr, "doxlab experiment %s: %v\n", name, err2)
		return 1
	}
	if err != nil {
		return 1
	}
	return exitOK
}

func runOverhead(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("experiment overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c experiment.Overhead
	quick := fs.Bool("quick", false, "the first 10 names")
	transports := fs.String("transports", strings.Join(protocol.Names(nil), ","), "transports")
	modes := fs.String("modes", "new,persistent", "connection modes: new (one per query), persistent")
	certs := fs.String("certs", "small", "certificate chains: small (one ECDSA certificate), large (an RSA chain)")
	namesFile := fs.String("names", "", "a file of names, one per line (default: the shipped list of 100)")
	fs.IntVar(&c.LargeCertOctets, "large-cert-octets", 4000, "the large chain's size")
	fs.StringVar(&c.KeyShare, "key-share", "pq", "the client's TLS key share: pq (Go's default X25519MLKEM768) or classic (X25519, as the papers)")
	fs.StringVar(&c.Keep, "keep", "", "a directory to keep the captures and the key log in, for Wireshark")
	storeFlag(fs, &c.Store)
	lowLatencyFlag(fs, &c.LowLatency)
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	c.Transports, c.Modes, c.Certs = splitList(*transports), splitList(*modes), splitList(*certs)
	if *namesFile != "" {
		names, err := measure.ReadTargets(*namesFile)
		if err != nil {
			fmt.Fprintf(stderr, "doxlab experiment overhead: %v\n", err)
			return exitUsage
		}
		c.Names = names
	}
	if *quick {
		if len(c.Names) == 0 {
			c.Names = overhead.Names
		}
		c.Names = c.Names[:min(10, len(c.Names))]
	}
	c.Log = stderr
	return runAndShow("overhead", c.Store, stderr, c.Run, func(ctx context.Context, st *store.Store, id string) error {
		cs, err := experiment.LoadOverhead(ctx, st, id)
		if err != nil {
			return err
		}
		cells := experiment.SummarizeOverhead(cs)
		fmt.Fprintf(stdout, "experiment %s, stored in %s: %d connections; octets per resolution (both directions, IP included) by layer\n", id, c.Store, len(cs))
		fmt.Fprintf(stdout, "%-6s %-10s %-5s %5s %8s %6s", "cert", "mode", "dns", "res", "octets", "pkts")
		for _, l := range overhead.LayerNames {
			fmt.Fprintf(stdout, " %9s", l)
		}
		fmt.Fprintln(stdout)
		for _, x := range cells {
			fmt.Fprintf(stdout, "%-6s %-10s %-5s %5d %8.0f %6.1f", x.Cert, x.Mode, x.Transport, x.Resolutions, x.Octets, x.Packets)
			for _, v := range x.Layers {
				fmt.Fprintf(stdout, " %9.0f", v)
			}
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "\nsingle query on a new connection, medians of IP payload octets (the IMC 2022 slides' table)\n")
		fmt.Fprintf(stdout, "%-6s %-5s %8s %14s %14s %7s %9s\n", "cert", "dns", "total", "handshake c>r", "handshake r>c", "query", "response")
		for _, x := range cells {
			if x.Mode == "new" {
				fmt.Fprintf(stdout, "%-6s %-5s %8.0f %14.0f %14.0f %7.0f %9.0f\n", x.Cert, x.Transport, x.Total, x.HandshakeUp, x.HandshakeDown, x.Query, x.Response)
			}
		}
		return nil
	})
}

// storeFlag is the experiments' --store; they resume from it too.
func storeFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "store", "doxlab.db", "the store (SQLite file or postgres:// URL)")
}

// lowLatencyFlag is the experiments' --low-latency (testbed.Spec.LowLatency).
func lowLatencyFlag(fs *flag.FlagSet, p *bool) {
	fs.BoolVar(p, "low-latency", false, "keep every CPU from halting while the testbed runs (see testbed up --low-latency), for VMs slow to wake a halted vCPU")
}

// resumeFlag is --resume: an experiment's ID continues it, measuring only
// what is not stored yet.
func resumeFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "resume", "", "continue the experiment with this ID")
}

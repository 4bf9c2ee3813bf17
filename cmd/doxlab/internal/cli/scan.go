package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/scan"
	"github.com/doxlab/doxlab/store"
)

const scanUsage = `usage: doxlab scan --rate N [flags] RANGE...

Probes every address of the ranges (IPv4 addresses or CIDR prefixes) on the
QUIC ports with an Initial of a reserved version and lists the versions each
Version Negotiation offers; --dns-ports adds a Do53 probe. Probes go out in a
random order at --rate packets per second, never to a blocklisted or opted-out
prefix, nor to a special-purpose address (private, loopback, link-local and
cloud metadata, multicast, broadcast) unless --allow-special names its block.
Nothing is scanned by default; more than 65536 targets or more than 10000
probes/s must be asked for explicitly.

  doxlab scan --zmap-probe FILE   writes the QUIC probe for ZMap's UDP module

`

// scanFlags are the flags that set scan.Spec's fields, for its errors.
var scanFlags = map[string]string{"Ranges": "RANGE arguments", "Rate": "--rate", "AllowFast": "--allow-fast", "AllowLarge": "--allow-large", "AllowSpecial": "--allow-special PREFIX"}

func runScan(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scanUsage); fs.PrintDefaults() }
	var s scan.Spec
	quicPorts := fs.String("quic-ports", "784,853,8853", "QUIC ports (the paper's DoQ ports)")
	dnsPorts := fs.String("dns-ports", "", "Do53 UDP ports, e.g. 53")
	fs.Float64Var(&s.Rate, "rate", 0, "probes per second (required)")
	var block, optOut stringList
	fs.Var(&block, "blocklist", "a file of prefixes never to probe; repeatable")
	fs.Var(&optOut, "opt-out", "a file of prefixes whose owners opted out; repeatable")
	fs.DurationVar(&s.Cooldown, "cooldown", 2*time.Second, "listen this long after the last probe")
	fs.BoolVar(&s.AllowLarge, "allow-large", false, "allow more than 65536 targets")
	fs.BoolVar(&s.AllowFast, "allow-fast", false, "allow more than 10000 probes per second")
	var allowSpecial stringList
	fs.Var(&allowSpecial, "allow-special", "probe this special-purpose `PREFIX` (a lab's 10.0.0.0/8, loopback's 127.0.0.0/8): every other private, loopback, link-local, multicast or broadcast address is skipped; repeatable")
	dsn := fs.String("store", "", "keep the scan in this store (SQLite file or postgres:// URL)")
	asJSON := fs.Bool("json", false, "one JSON object per answer")
	zmap := fs.String("zmap-probe", "", "write the QUIC probe for ZMap's UDP module to FILE and exit")
	ranges, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	if *zmap != "" {
		if err := os.WriteFile(*zmap, scan.ZMapProbe(), 0o644); err != nil {
			fmt.Fprintf(stderr, "doxlab scan: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: 1200-octet QUIC Initial with version 0x%08x; zmap -M udp -p 853 --probe-args=file:%s\n", *zmap, 0x1a2a3a4a, *zmap)
		return exitOK
	}
	s.Ranges, s.Blocklist, s.OptOut, s.AllowSpecial = ranges, block, optOut, allowSpecial
	for _, p := range []struct {
		flag string
		dst  *[]int
	}{{*quicPorts, &s.QUICPorts}, {*dnsPorts, &s.DNSPorts}} {
		for _, f := range splitList(p.flag) {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 || n > 65535 {
				fmt.Fprintf(stderr, "doxlab scan: bad port %q\n", f)
				return exitUsage
			}
			*p.dst = append(*p.dst, n)
		}
	}
	// Refused before the store opens: a run begun for a scan that never
	// sends once stayed in the store, empty.
	if err := s.Check(); err != nil {
		return scanFailed(err, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var st *store.Store
	runID := "scan-" + store.NewID()
	if *dsn != "" {
		if st, err = store.Open(ctx, *dsn); err != nil {
			fmt.Fprintf(stderr, "doxlab scan: %v\n", err)
			return 1
		}
		defer st.Close()
		run := store.NewRun(scan.RunKind, "", s)
		run.ID = runID
		if err := st.BeginRun(ctx, run); err != nil {
			fmt.Fprintf(stderr, "doxlab scan: %v\n", err)
			return 1
		}
	}
	var storeErr error
	stats, err := scan.Run(ctx, s, func(r scan.Result) {
		if st != nil && storeErr == nil {
			storeErr = scan.Save(context.Background(), st, runID, r)
		}
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(stdout, string(b))
			return
		}
		extra := "versions " + strings.Join(r.Versions, " ")
		if r.Kind == "do53" {
			extra = "rcode " + r.Rcode
		}
		fmt.Fprintf(stdout, "%-5s %-21s %8.3f ms  %s\n", r.Kind, r.Target, r.RTTMs, extra)
	})
	if stats.Targets > 0 {
		unsent := ""
		if stats.Unsent > 0 {
			unsent = fmt.Sprintf(", %d not sent (%s)", stats.Unsent, stats.UnsentWhy)
		}
		special := ""
		if stats.Special > 0 {
			special = fmt.Sprintf(", %d special-purpose skipped (--allow-special PREFIX probes a block)", stats.Special)
		}
		fmt.Fprintf(stderr, "doxlab scan: %d targets (%d blocked%s), %d probes sent at %.0f/s%s, %d answered, %.1f s\n",
			stats.Targets, stats.Blocked, special, stats.Sent, stats.Rate, unsent, stats.Answers, stats.Elapsed.Seconds())
	}
	if st != nil {
		fmt.Fprintf(stderr, "doxlab scan: stored as run %s in %s\n", runID, *dsn)
	}
	for _, e := range []error{err, storeErr} {
		if e != nil {
			return scanFailed(e, stderr)
		}
	}
	return exitOK
}

// scanFailed says why a scan failed, naming the flag to set where the
// library names its Spec field; a refused spec exits 2.
func scanFailed(err error, stderr io.Writer) int {
	se, refused := errors.AsType[*scan.SpecError](err)
	if !refused {
		fmt.Fprintf(stderr, "doxlab scan: %v\n", err)
		return 1
	}
	msg := se.Err.Error()
	if f := scanFlags[se.Field]; f != "" {
		msg += " (" + f + ")"
	}
	if errors.Is(err, scan.ErrInternetWide) {
		msg += " (--zmap-probe FILE writes it)"
	}
	fmt.Fprintf(stderr, "doxlab scan: %s\n", msg)
	return exitUsage
}

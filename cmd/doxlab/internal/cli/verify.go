package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/verify"
)

const verifyUsage = `usage: doxlab verify [flags] [IP[:PORT]...]

Verifies DoQ candidates: a QUIC handshake offering v1 and v2 and the DoQ
ALPNs (doq, doq-i00 ... doq-i11), then a real DNS query, then a second
connection for resumption, NEW_TOKEN and 0-RTT. Candidates come from the
arguments, from --targets (one IP or IP:PORT per line; ZMap's CSV output
with saddr,sport works, a header line is skipped) or from a scan
kept in a store (--store with --scan-run).

`

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, verifyUsage); fs.PrintDefaults() }
	targetsFile := fs.String("targets", "", "a file of candidates (IP or IP:PORT per line; ZMap CSV)")
	port := fs.Int("port", 853, "the port of candidates given without one")
	dsn := fs.String("store", "", "keep the results in this store; with --scan-run, read the candidates from it")
	scanRun := fs.String("scan-run", "", "verify the QUIC services a stored scan found")
	name := fs.String("name", "example.com", "the name queried")
	timeout := fs.Duration("timeout", 5*time.Second, "per step")
	asJSON := fs.Bool("json", false, "one JSON object per candidate")
	protocols := fs.String("protocols", "doq", "what to verify on each candidate: doq, dot, doh (their default ports 853, 853, 443 apply to bare IPs)")
	rest, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab verify: "+format+"\n", a...)
		return code
	}
	var targets []string
	for _, a := range rest {
		t, err := verify.Target(a, *port)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		targets = append(targets, t)
	}
	if *targetsFile != "" {
		more, err := verify.ReadTargets(*targetsFile, *port)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		targets = append(targets, more...)
	}
	if *timeout <= 0 {
		return fail(exitUsage, "--timeout %v: want a positive duration", *timeout)
	}
	protos := splitList(*protocols)
	for _, p := range protos {
		if p != "doq" && p != "dot" && p != "doh" {
			return fail(exitUsage, "unknown protocol %q (want doq, dot, doh)", p)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var st *store.Store
	if *dsn != "" {
		if st, err = store.Open(ctx, *dsn); err != nil {
			return fail(1, "%v", err)
		}
		defer st.Close()
		if *scanRun != "" {
			more, err := verify.ScanTargets(ctx, st, *scanRun)
			if err != nil {
				return fail(1, "%v", err)
			}
			targets = append(targets, more...)
		}
	}
	if len(targets) == 0 {
		return fail(exitUsage, "no candidates (arguments, --targets or --store with --scan-run)")
	}
	runID := "verify-" + store.NewID()
	if st != nil {
		run := store.NewRun("verify", "", map[string]any{"targets": len(targets), "name": *name})
		run.ID = runID
		if err := st.BeginRun(ctx, run); err != nil {
			return fail(1, "%v", err)
		}
	}
	var sv verify.Survey
	o := verify.Options{Name: *name, Timeout: *timeout}
	store1 := func(t string, v any) error {
		if st == nil {
			return nil
		}
		return verify.Save(ctx, st, runID, t, v)
	}
	for _, t := range targets {
		if ctx.Err() != nil {
			break
		}
		host, _, _ := net.SplitHostPort(t)
		for _, p := range protos {
			var v any
			switch p {
			case "doq":
				r := verify.VerifyDoQ(ctx, t, o)
				sv.DoQ, v = append(sv.DoQ, r), r
				if !*asJSON {
					cert := "-"
					if r.Cert != nil {
						cert = fmt.Sprintf("%s-%d %dB", r.Cert.KeyType, r.Cert.KeyBits, r.Cert.Octets)
					}
					fmt.Fprintf(stdout, "doq %-21s %-14s %-4s %-8s rcode %-8s retry %-3s token %-3s resumed %-3s 0-RTT %-3s cert %s\n", t, r.Verdict, orDash(r.QUICVersion), orDash(r.ALPN),
						orDash(r.Rcode), yn(r.Retry), yn(r.TokenAccepted), yn(r.Resumed), yn(r.ZeroRTT), cert)
				}
			case "dot":
				target := net.JoinHostPort(host, "853")
				r := verify.VerifyDoT(ctx, target, o)
				sv.DoT, v = append(sv.DoT, r), r
				if !*asJSON {
					fmt.Fprintf(stdout, "dot %-21s answers %-3s TLS %-4s alpn-dot %-3s no-alpn %-3s keepalive %-3s %s\n", target, yn(r.Answers), orDash(r.TLS), yn(r.ALPNDoT), yn(r.NoALPN), yn(r.Keepalive), r.Error)
				}
			case "doh":
				target := net.JoinHostPort(host, "443")
				r := verify.VerifyDoH(ctx, target, o)
				sv.DoH, v = append(sv.DoH, r), r
				if !*asJSON {
					fmt.Fprintf(stdout, "doh %-21s endpoints %d  HTTP/1.1 %-3s /2 %-3s /3 %-3s alt-svc %q TLS %s  odoh %s  ech %s\n", target, len(r.Endpoints), yn(r.HTTP11), yn(r.HTTP2), yn(r.HTTP3), r.AltSvc, strings.Join(r.TLSVersions, ","),
						odohText(r), orNo(r.ECH))
				}
			}
			if *asJSON {
				b, _ := json.Marshal(v)
				fmt.Fprintln(stdout, string(b))
			}
			if err := store1(t, v); err != nil {
				return fail(1, "%v", err)
			}
		}
	}
	sv.Write(stdout)
	if st != nil {
		fmt.Fprintf(stderr, "doxlab verify: stored as run %s in %s\n", runID, *dsn)
	}
	return exitOK
}

// runSurvey prints the survey tables of verifications kept in a store.
func runSurvey(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("survey", stderr)
	fs.SetOutput(stderr)
	dsn := new(string)
	storeFlag(fs, dsn)
	runPrefix := fs.String("run", "", "only runs whose ID starts with this (default all verify runs)")
	targetsOut := fs.String("targets-out", "", "also write the hosts that passed every protocol of --speaks to `FILE`, a campaign's targets_file, with what was verified of each")
	speaks := fs.String("speaks", "doq", "with --targets-out: the protocols a host must have passed, of doq, dot and doh")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	ctx := context.Background()
	st, code := openExistingStore(ctx, *dsn, "survey", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	sv, err := verify.LoadSurvey(ctx, st, *runPrefix)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab survey: %v\n", err)
		return 1
	}
	if sv.Empty() {
		fmt.Fprintf(stderr, "doxlab survey: no verifications in %s (run doxlab verify --store)\n", *dsn)
		return 1
	}
	sv.Write(stdout)
	if *targetsOut != "" {
		passed, err := sv.Passed(strings.Split(*speaks, ","))
		if err != nil {
			fmt.Fprintf(stderr, "doxlab survey: --speaks: %v\n", err)
			return 2
		}
		var b strings.Builder
		header := fmt.Sprintf("%d hosts that passed %s in %s (doxlab survey, %s): a campaign's targets_file", len(passed), *speaks, store.Redact(*dsn), time.Now().UTC().Format(time.RFC3339))
		err = verify.WriteTargets(&b, passed, header)
		if err == nil {
			err = os.WriteFile(*targetsOut, []byte(b.String()), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "doxlab survey: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%d hosts that passed %s written to %s\n", len(passed), *speaks, *targetsOut)
	}
	return exitOK
}

// orNo is s, or "no" when empty.
func orNo(s string) string {
	if s == "" {
		return "no"
	}
	return s
}

// odohText is what a DoH resolver's line says of ODoH: whether it
// answered a sealed query as a target, and whether its own HTTPS record
// carries an ODoH config.
func odohText(r *verify.DoH) string {
	var parts []string
	if r.ODoHAnswers {
		parts = append(parts, "target")
	}
	if r.ODoHInHTTPS != nil {
		parts = append(parts, "config-in-https")
	}
	if len(parts) == 0 {
		return "no"
	}
	return strings.Join(parts, "+")
}

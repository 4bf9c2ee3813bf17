package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

const serveUsage = `usage: doxlab serve [--config FILE] [flags]

Serves DNS over UDP, TCP, DoT, DoH (HTTP/1.1, /2, /3) and DoQ, and web
pages over HTTP/3 and HTTP/2, with one TLS identity and one set of ticket
and token keys. Without --config or listener flags it serves on loopback:
udp and tcp 127.0.0.1:5300, dot and doq 127.0.0.1:8853, doh (TCP) and doh3
(UDP) 127.0.0.1:8443, and prints the URL that reaches each (a URL
without a port means 53, 853 or 443: --standard-ports serves on those).
Flags override the config file.

flags:
`

// listenerURL is the URL that reaches a listener, ready for doxlab query
// and measure.
func listenerURL(name, addr, dohPath string) string {
	for _, p := range protocol.All {
		if p.Listener() == name { // DoH's first row, HTTP/1.1, stands for its listener
			return p.URL(addr, dohPath)
		}
	}
	switch name {
	case "web":
		return "https://" + addr + "/ (pages; DoH/3 at h3://" + addr + dohPath + ")"
	case "metrics":
		return "http://" + addr + "/metrics"
	}
	return ""
}

// answersSaid says what the server answers with, and, when nothing is
// configured, that every query is refused and how to change that.
func answersSaid(a server.Answers) string {
	var what []string
	if n := len(a.Static); n > 0 {
		what = append(what, fmt.Sprintf("%d static records", n))
	}
	if a.Zone != "" {
		what = append(what, "the zone in "+a.Zone)
	}
	if a.Hosts != "" {
		what = append(what, "the names in "+a.Hosts)
	}
	if a.Any != "" {
		what = append(what, "any other name with "+a.Any)
	}
	if a.Forward != "" {
		what = append(what, "the rest forwarded to "+a.Forward)
	}
	if len(what) == 0 {
		return "none configured: every query is answered REFUSED (add --any IP, --zone FILE, --hosts FILE or --forward URL)"
	}
	return strings.Join(what, "; ")
}

// sayServing prints each listener with the URL that reaches it, what it
// answers, ODoH and ECH when on, and the certificate's SPKI.
func sayServing(stderr io.Writer, srv *server.Server, cfg *server.Config) {
	for _, name := range server.ListenerNames {
		if a := srv.Addr(name); a != nil {
			fmt.Fprintf(stderr, "doxlab serve: %-7s %-21s %s\n", name, a, listenerURL(name, a.String(), cfg.DoHPath))
		}
	}
	fmt.Fprintf(stderr, "doxlab serve: answers: %s\n", answersSaid(cfg.Answers))
	if o := cfg.ODoH; o.Target || o.Proxy {
		fmt.Fprintf(stderr, "doxlab serve: oblivious DoH on %s: target %s, proxy %s (to %s)\n", cfg.DoHPath, yn(o.Target), yn(o.Proxy), strings.Join(o.ProxyTargets, ", "))
	}
	if e := cfg.Web.ECH; e.PublicName != "" {
		fmt.Fprintf(stderr, "doxlab serve: ECH on the web listener, public name %s\n", e.PublicName)
	}
	fmt.Fprintf(stderr, "doxlab serve: certificate SPKI %s (clients: --ca with the file --cert-out writes, or --insecure)\n", srv.SPKI())
}

// writeReady writes the server's listeners and SPKI to path as JSON,
// whole and then renamed: a waiter never reads half of it.
func writeReady(path string, srv *server.Server) error {
	b, _ := json.Marshal(srv.Ready())
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfgPath                                  = fs.String("config", "", "YAML config `FILE`")
		udp, tcp, dot, doh, doh3, doq, web       string
		any, zone, hosts, forward, records, cert string
		key, certOut, retry, metrics, dohPath    string
		readyFile, cpuProfile                    string
		exitOnEOF                                bool
		static, sites                            stringList
		noZeroRTT, inOrder, cache, standardPorts bool
		delay                                    time.Duration
		delayEvery                               int
	)
	fs.StringVar(&udp, "udp", "", "serve Do53 over UDP on `addr`")
	fs.StringVar(&tcp, "tcp", "", "serve Do53 over TCP on `addr`")
	fs.StringVar(&dot, "dot", "", "serve DoT on `addr`")
	fs.StringVar(&doh, "doh", "", "serve DoH over HTTP/1.1 and HTTP/2 on TCP `addr`")
	fs.StringVar(&doh3, "doh3", "", "serve DoH over HTTP/3 on UDP `addr`")
	fs.StringVar(&doq, "doq", "", "serve DoQ on `addr`")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the server's CPU profile (pprof) to `FILE` until it stops")
	fs.StringVar(&web, "web", "", "serve pages (and DoH) over HTTP/3 and HTTP/2 on `addr`")
	fs.Var(&sites, "site", "serve the directory `[HOST=]DIR` on the web listener, for HOST or any host (repeatable)")
	fs.StringVar(&dohPath, "doh-path", "", "DoH endpoint path (default /dns-query)")
	fs.StringVar(&any, "any", "", "answer any name with this `IP`")
	fs.Var(&static, "record", "serve this resource record (zone-file syntax; repeatable)")
	fs.StringVar(&zone, "zone", "", "serve this RFC 1035 zone `file`")
	fs.StringVar(&hosts, "hosts", "", "serve the names in this hosts `file`")
	fs.StringVar(&forward, "forward", "", "forward other queries to this upstream `URL`")
	fs.BoolVar(&cache, "cache", false, "cache forwarded answers")
	fs.BoolVar(&standardPorts, "standard-ports", false, "without listener flags, serve on loopback's standard ports (53, 853, 443: what URLs without a port reach; needs root or CAP_NET_BIND_SERVICE)")
	fs.StringVar(&cert, "cert", "", "certificate PEM `file` (default: generated)")
	fs.StringVar(&key, "key", "", "key PEM `file`")
	fs.StringVar(&certOut, "cert-out", "", "write the certificate in use to `file` (for clients' --ca)")
	fs.StringVar(&retry, "retry", "", "QUIC address validation: never, always or first")
	fs.BoolVar(&noZeroRTT, "no-0rtt", false, "refuse QUIC 0-RTT")
	fs.DurationVar(&delay, "delay", 0, "delay every answer by `d`")
	fs.IntVar(&delayEvery, "delay-every", 0, "delay every `N`th answer by 1 s")
	fs.BoolVar(&inOrder, "in-order", false, "answer each TCP/DoT connection strictly in query order")
	fs.StringVar(&readyFile, "ready", "", "once every listener is bound, write `file` as JSON: the listeners' addresses and the SPKI (for programs that wait for the server)")
	fs.BoolVar(&exitOnEOF, "exit-on-eof", false, "stop when standard input ends: a program that starts the server holds it open, and its end, a crash included, stops the server")
	fs.StringVar(&records, "records", "", "write a JSON line per query and connection to `file` (- for stdout)")
	fs.StringVar(&metrics, "metrics", "", "serve Prometheus metrics on `addr`")
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "doxlab serve: %v\n", err)
		return exitUsage
	}
	cfg := &server.Config{}
	if *cfgPath != "" {
		c, err := server.ReadConfig(*cfgPath) // checked whole by server.New, once the flags are on it
		if err != nil {
			return fail(err)
		}
		cfg = c
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	l := &cfg.Listen
	set(&l.UDP, udp)
	set(&l.TCP, tcp)
	set(&l.DoT, dot)
	set(&l.DoH, doh)
	set(&l.DoH3, doh3)
	set(&l.DoQ, doq)
	set(&l.Web, web)
	if *l == (server.Listen{}) {
		dns, tls, https := "5300", "8853", "8443" // unprivileged: serve prints the URLs that reach them
		if standardPorts {
			dns, tls, https = "53", "853", "443"
		}
		*l = server.Listen{UDP: "127.0.0.1:" + dns, TCP: "127.0.0.1:" + dns, DoT: "127.0.0.1:" + tls, DoQ: "127.0.0.1:" + tls, DoH: "127.0.0.1:" + https, DoH3: "127.0.0.1:" + https}
	}
	set(&cfg.DoHPath, dohPath)
	set(&cfg.Answers.Any, any)
	set(&cfg.Answers.Zone, zone)
	set(&cfg.Answers.Hosts, hosts)
	set(&cfg.Answers.Forward, forward)
	cfg.Answers.Static = append(cfg.Answers.Static, static...)
	cfg.Answers.Cache = cfg.Answers.Cache || cache
	set(&cfg.TLS.Cert, cert)
	set(&cfg.TLS.Key, key)
	set(&cfg.TLS.CertOut, certOut)
	set(&cfg.QUIC.Retry, retry)
	cfg.QUIC.NoZeroRTT = cfg.QUIC.NoZeroRTT || noZeroRTT
	// Below 0 is a typo, as in the config file: it was dropped unsaid,
	// and the server answered at once where a delay was asked.
	if delay < 0 {
		return fail(fmt.Errorf("--delay %v: want 0 or more", delay))
	}
	if delayEvery < 0 {
		return fail(fmt.Errorf("--delay-every %d: want 0 (none) or more", delayEvery))
	}
	if delay > 0 {
		cfg.Faults.Delay = delay
	}
	if delayEvery > 0 {
		cfg.Faults.DelayEvery = delayEvery
	}
	cfg.Faults.InOrder = cfg.Faults.InOrder || inOrder
	for _, site := range sites {
		host, dir, ok := strings.Cut(site, "=")
		if !ok {
			host, dir = "*", site
		}
		if cfg.Web.Roots == nil {
			cfg.Web.Roots = map[string]string{}
		}
		cfg.Web.Roots[host] = dir
	}
	set(&cfg.Records, records)
	set(&cfg.Metrics, metrics)

	srv, err := server.New(cfg)
	if err != nil {
		return fail(err)
	}
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		return fail(fmt.Errorf("--cpuprofile: %w", err))
	}
	defer stopProfile()
	if err := srv.Start(); err != nil {
		return fail(err)
	}
	defer srv.Close()
	sayServing(stderr, srv, cfg)
	if readyFile != "" {
		if err := writeReady(readyFile, srv); err != nil {
			return fail(err)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	if exitOnEOF {
		go func() {
			io.Copy(io.Discard, os.Stdin)
			sig <- syscall.SIGTERM
		}()
	}
	<-sig
	return exitOK
}

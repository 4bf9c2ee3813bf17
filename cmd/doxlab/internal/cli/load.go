package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/pageload/capture"
	"github.com/doxlab/doxlab/transport"
)

const loadUsage = `usage: doxlab load URL [flags]

Loads one page with doxlab's own page loader: the page's resources over
HTTP/3 (or --h2), in the order and at the moments its dependency graph
says (--graph, captured from Chromium with --capture; without one, the
resources its HTML names), each host looked up once (--dns, --resolve,
else the system's resolver). Prints PLT, first byte, each lookup, each
connection with what it really did (resumed, 0-RTT), and each resource.

  doxlab load --capture page.json https://page.example/      # trace Chromium's load into a graph
  doxlab load --graph page.json --dns quic://10.0.0.53 --allow-special 10.0.0.0/8 --0rtt --repeat 3 https://page.example/
  doxlab load --graph page.json --coalesce dnsstream --dns https://10.0.0.2/ --allow-special 10.0.0.0/8 --0rtt --repeat 2 https://page.example/

With --coalesce, the lookups ride on the page's own HTTP/3 connection to
the --dns server, which is resolver and origin: as DoH/3 requests (doh3)
or as DNS streams (dnsstream, docs/dnsstream.md), in 0-RTT when resumed.

No page, and no resolver's answer, leads the loader to a special-purpose
address (loopback, cloud metadata, private networks: a testbed's or a
lab's own) but where --allow-special opens its block, the page's URL
names it, or --resolve pins it.

`

type resolveFlags map[string]netip.Addr

func (r resolveFlags) String() string { return "" }

func (r resolveFlags) Set(s string) error {
	host, addr, ok := strings.Cut(s, ":")
	a, err := netip.ParseAddr(addr)
	if !ok || host == "" || err != nil {
		return fmt.Errorf("want HOST:ADDRESS, as curl's --resolve without the port")
	}
	r[host] = a
	return nil
}

func runLoad(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("load", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, loadUsage); fs.PrintDefaults() }
	graphPath := fs.String("graph", "", "the page's dependency graph (JSON); default: the resources its HTML names, one level deep")
	capture := fs.String("capture", "", "load the page in Chromium instead and write its dependency graph to `FILE`")
	dnsURL := fs.String("dns", "", "resolve over this DNS server URL (udp://, tcp://, tls://, https://, h3://, quic://); default the system's resolver")
	resolve := resolveFlags{}
	fs.Var(resolve, "resolve", "`HOST:ADDRESS` without DNS (repeatable)")
	h2 := fs.Bool("h2", false, "HTTP/2 over TLS over TCP instead of HTTP/3")
	zeroRTT := fs.Bool("0rtt", false, "send requests in 0-RTT when a ticket from an earlier load allows (with --repeat)")
	repeat := fs.Int("repeat", 1, "loads of the page, one after another; tickets carry over, connections do not")
	port := fs.Int("port", 0, "the origins' port (default the URL's, else 443)")
	caPath := fs.String("ca", "", "verify servers against these PEM certificates")
	insecure := fs.Bool("insecure", false, "do not verify servers' certificates")
	timeout := fs.Duration("timeout", 30*time.Second, "give up a load after this long")
	asJSON := fs.Bool("json", false, "print each load as one JSON line")
	coalesce := fs.String("coalesce", "", "resolve on the page's own HTTP/3 connection to the --dns server (an https:// URL with an IP address): doh3 or dnsstream")
	waitSettings := fs.Bool("wait-settings", false, "hold each HTTP/3 connection's requests until the server's SETTINGS arrive")
	httpsRR := fs.Bool("https-records", false, "ask each host's HTTPS record first; its IPv4 hints spare the A lookup when it offers h3, its ech= config is used")
	noECH := fs.Bool("no-ech", false, "with --https-records: ignore the records' ECH configs (the site's name in clear)")
	alongside := fs.Bool("https-alongside", false, "with --dns: ask each host's HTTPS record beside its A records and go on with the A answer, as Chromium does over plain DNS")
	discover := fs.Bool("discover", false, "start each origin over HTTP/2 unless its HTTPS record or an earlier Alt-Svc header offered HTTP/3, as a browser does")
	origins := fs.Bool("origins", false, "fetch an origin a connection announced in an ORIGIN frame on it, without a lookup")
	tokens := fs.String("tokens", pageload.TokensKeep, "how QUIC NEW_TOKEN tokens are kept for later loads: keep (the newest from each server) or chromium (as Chromium's session cache keeps them: only one that arrived after its connection's ticket)")
	maxLookups := fs.Int("max-lookups", pageload.ChromiumMaxLookups, "lookups in flight at once, as a browser's host resolver allows (Chromium's 6); 0: no bound")
	maxPage := fs.Int64("max-page-mib", 64, "end a load whose response bodies together exceed this many MiB")
	maxResource := fs.Int64("max-resource-mib", 32, "fail a resource whose body exceeds this many MiB")
	var allow stringList
	fs.Var(&allow, "allow-special", "let pages be loaded from and reach this special-purpose `PREFIX` (a testbed's 10.0.0.0/8, loopback's 127.0.0.0/8; repeatable)")
	browserUser := fs.String("browser-user", cmp.Or(os.Getenv("DOXLAB_BROWSER_USER"), campaign.DefaultBrowserUser),
		"with --capture as root: the unprivileged user Chromium runs as, with its sandbox on ($DOXLAB_BROWSER_USER); as root Chromium has none")
	spki := fs.String("spki", "", "with --capture: accept certificates with this base64 SHA-256 public key hash (a self-signed server's)")
	pos, fail, code, done := subcommand(fs, "load", args, 1, "", stderr)
	if done {
		return code
	}
	page := pos[0]
	u, err := url.Parse(page)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fail("%q: want an https:// URL", page)
	}
	if *repeat < 1 || *repeat > 10000 {
		return fail("--repeat %d: want 1 to 10000", *repeat)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *capture != "" {
		return captureGraph(ctx, page, *capture, *spki, *browserUser, resolve, *timeout, stdout, stderr)
	}
	cfg := pageload.Config{Insecure: *insecure, Timeout: *timeout, ZeroRTT: *zeroRTT, Port: *port, Resolver: pageload.System{}, WaitSettings: *waitSettings, Origins: *origins, HTTPSRecords: *httpsRR, NoECH: *noECH, HTTPSAlongside: *alongside, MaxLookups: *maxLookups, Tokens: *tokens,
		MaxPageBytes: *maxPage << 20, MaxResourceBytes: *maxResource << 20}
	if *maxPage <= 0 || *maxResource <= 0 {
		return fail("--max-page-mib and --max-resource-mib: want a positive size")
	}
	if *timeout <= 0 {
		return fail("--timeout %v: want a positive duration", *timeout)
	}
	switch {
	case *h2 && *discover:
		return fail("give --h2 or --discover, not both")
	case *h2:
		cfg.Protocol = "h2"
	case *discover:
		cfg.Protocol = "auto"
	}
	if cfg.Port == 0 && u.Port() != "" {
		fmt.Sscan(u.Port(), &cfg.Port)
	}
	if cfg.AllowSpecial, err = blocklist.ParseAllow(allow); err != nil {
		return fail("--allow-special: %v", err)
	}
	for _, a := range resolve {
		// What the user pins is theirs to reach.
		if _, ok := blocklist.SpecialOf(a); ok {
			a = a.Unmap().WithZone("")
			cfg.AllowSpecial = append(cfg.AllowSpecial, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	if *caPath != "" {
		if cfg.RootCAs, err = loadCA(*caPath); err != nil {
			return fail("%v", err)
		}
	}
	switch {
	case len(resolve) > 0 && *dnsURL != "":
		return fail("give --dns or --resolve, not both")
	case *coalesce != "":
		if cfg.Coalesce, err = coalesceFlag(*coalesce, *dnsURL); err != nil {
			return fail("--coalesce: %v", err)
		}
		cfg.Resolver = nil
	case len(resolve) > 0:
		cfg.Resolver = pageload.Hosts(resolve)
	case *dnsURL != "":
		ep, err := transport.ParseURL(*dnsURL)
		if err != nil {
			return fail("--dns: %v", err)
		}
		tr, err := transport.New(*dnsURL, transport.Options{Reuse: true, Timeout: transport.DefaultTimeout, RootCAs: cfg.RootCAs, Insecure: *insecure})
		if err != nil {
			return fail("--dns: %v", err)
		}
		defer tr.Close()
		cfg.Resolver = &pageload.DNS{Name: ep.Scheme, Transport: tr}
	}
	l, err := pageload.New(cfg)
	if err != nil {
		return fail("%v", err)
	}
	var g *pageload.Graph
	if *graphPath != "" {
		if g, err = pageload.ReadGraph(*graphPath); err != nil {
			return fail("%v", err)
		}
		if g.Page != page {
			fmt.Fprintf(stderr, "doxlab load: note: the graph was captured for %s\n", g.Page)
		}
	} else {
		body, r := l.Document(ctx, page)
		if r.Status != "ok" {
			fmt.Fprintf(stderr, "doxlab load: %s\n", r.Error) // it names the page
			specialHint(stderr, r)
			return 1
		}
		if g, err = pageload.FromHTML(page, body); err != nil {
			return fail("reading %s's HTML: %v", page, err)
		}
		l.Forget() // the loads below start cold, as --repeat promises
		fmt.Fprintf(stderr, "doxlab load: no --graph: %d resources named by the page's HTML (scripts' fetches and compute gaps unknown; capture a graph for those)\n", len(g.Resources))
	}
	var failed *pageload.Result // the first load that failed
	for i := range *repeat {
		r := l.Load(ctx, g)
		if r.Status != "ok" && failed == nil {
			failed = r
		}
		if *asJSON {
			json.NewEncoder(stdout).Encode(r)
		} else {
			writeLoad(stdout, i+1, r, g)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed != nil {
		specialHint(stderr, failed)
		return 1
	}
	return exitOK
}

// specialHint says how to open a special-purpose block when r failed,
// or lost a resource, for want of it: a testbed's or lab's pages are
// there, and nothing but the user may open it. The hint names the
// blocks the load's lookups led to, as the flags to give.
func specialHint(w io.Writer, r *pageload.Result) {
	refused := strings.Contains(r.Error, blocklist.ErrSpecial.Error())
	for _, f := range r.Resources {
		refused = refused || strings.Contains(f.Error, blocklist.ErrSpecial.Error())
	}
	if !refused {
		return
	}
	var flags []string
	for _, lk := range r.Lookups {
		for _, s := range lk.Addrs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			if sp, ok := blocklist.SpecialOf(a); ok && !slices.Contains(flags, "--allow-special "+sp.Prefix.String()) {
				flags = append(flags, "--allow-special "+sp.Prefix.String())
			}
		}
	}
	if len(flags) == 0 {
		flags = []string{"--allow-special PREFIX"}
	}
	fmt.Fprintf(w, "doxlab load: hint: a page or a resolver's answer led to a special-purpose address; if the block is your testbed's or lab's own, add %s\n", strings.Join(flags, " "))
}

// coalesceFlag reads --coalesce MODE --dns https://IP[:PORT][/PATH].
func coalesceFlag(mode, dnsURL string) (*pageload.Coalesce, error) {
	u, err := url.Parse(dnsURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "h3") {
		return nil, fmt.Errorf("--dns %q: want the resolver's https:// URL", dnsURL)
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("--dns %q: want the resolver's IP address, the connection's first hop", dnsURL)
	}
	port := uint16(443)
	if u.Port() != "" {
		if _, err := fmt.Sscan(u.Port(), &port); err != nil {
			return nil, fmt.Errorf("--dns %q: bad port", dnsURL)
		}
	}
	c := &pageload.Coalesce{Mode: mode, Server: netip.AddrPortFrom(a, port), Name: u.Hostname()}
	if u.Path != "" && u.Path != "/" {
		c.Path = u.Path
	}
	return c, nil
}

// writeLoad prints one load: the totals, lookups, connections and
// resources; beside each resource, when the graph kept them, the captured
// load's own times, so a replay can be compared with it step by step.
func writeLoad(w io.Writer, n int, r *pageload.Result, g *pageload.Graph) {
	fmt.Fprintf(w, "load %d: %s %s PLT %.1f ms (network %.1f + onload %.1f), first byte %.1f ms", n, r.Status, r.Protocol, r.PLTMs, r.NetworkMs, r.OnloadGapMs, r.TTFBMs)
	if g.PLTMs > 0 {
		fmt.Fprintf(w, "; the captured load's PLT %.1f ms", g.PLTMs)
	}
	if r.Error != "" {
		fmt.Fprintf(w, ": %s", r.Error)
	}
	fmt.Fprintln(w)
	for _, lk := range r.Lookups {
		on := ""
		if lk.Coalesced {
			on = fmt.Sprintf(" on conn %d early=%t", lk.Conn, lk.Early)
		}
		fmt.Fprintf(w, "  dns  %-30s %-6s %7.1f ms  %s%s%s\n", lk.Host, lk.Transport, lk.EndMs-lk.StartMs, strings.Join(lk.Addrs, " "), on, lk.Error)
	}
	for _, c := range r.Conns {
		fmt.Fprintf(w, "  conn %-30s %-3s handshake done %6.1f ms  resumed=%t 0rtt-sent=%t 0rtt-accepted=%t requests=%d dns=%d settings %.1f ms%s origins=%s %s\n",
			c.Origin, c.Protocol, c.HandshakeMs, c.Resumed, c.Sent0RTT, c.Used0RTT, c.Requests, c.DNSQueries, c.SettingsMs,
			map[bool]string{true: " (waited)"}[c.WaitedSettings], strings.Join(c.Origins, ","), c.Error)
	}
	captured := slices.ContainsFunc(g.Resources, func(c pageload.Resource) bool { return c.EndMs > 0 })
	fmt.Fprintf(w, "  %7s %7s %7s %7s    %8s   %3s", "due", "sent", "first", "end", "octets", "st")
	if captured {
		fmt.Fprintf(w, "  %7s %7s %6s", "c.sent", "c.end", "Δend")
	}
	fmt.Fprintln(w, "  url (ms from the load's start; c.: the captured load's, its end on the wire where it was captured)")
	for i, f := range r.Resources {
		fmt.Fprintf(w, "  %7.1f %7.1f %7.1f %7.1f ms %8d B %3d", f.Due, f.Sent, f.FirstByte, f.End, f.Bytes, f.Status)
		if captured && i < len(g.Resources) {
			c := g.Resources[i]
			end := c.EndMs
			if c.WireEndMs > 0 {
				end = c.WireEndMs // where a replay's end is measured too
			}
			fmt.Fprintf(w, "  %7.1f %7.1f %+6.1f", c.SentMs, end, f.End-end)
		}
		fmt.Fprintf(w, "  %s %s\n", f.URL, f.Error)
	}
}

// captureGraph loads page in Chromium, traces it and writes its graph.
// As root, Chromium runs as user with its sandbox on: the page may be
// anyone's, and Chromium as root runs with none.
func captureGraph(ctx context.Context, page, out, spki, user string, resolve resolveFlags, timeout time.Duration, stdout, stderr io.Writer) int {
	u, _ := url.Parse(page)
	origin := u.Host
	if u.Port() == "" {
		origin += ":443"
	}
	opts := browser.Options{ForceQUIC: []string{origin}}
	if os.Geteuid() == 0 {
		opts.User = user
	}
	if spki != "" {
		opts.SPKI = []string{spki}
	}
	var rules []string
	for host, a := range resolve {
		rules = append(rules, "MAP "+host+" "+a.String())
	}
	if len(rules) > 0 {
		opts.Flags = append(opts.Flags, "host-resolver-rules="+strings.Join(rules, ","))
	}
	b, err := browser.Launch(ctx, opts)
	if err != nil {
		if opts.User != "" {
			err = fmt.Errorf("%w (as root, Chromium runs as --browser-user %s, with its sandbox)", err, user)
		}
		fmt.Fprintf(stderr, "doxlab load: %v\n", err)
		return 1
	}
	defer b.Close()
	l, tr, err := b.Trace(ctx, page, timeout)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab load: tracing %s: %v\n", page, err)
		return 1
	}
	g, err := capture.FromTrace(page, l, tr, pageload.Provenance{Browser: b.Version(), At: time.Now().UTC()})
	if err != nil {
		fmt.Fprintf(stderr, "doxlab load: %v\n", err)
		return 1
	}
	if err := pageload.WriteGraph(out, g); err != nil {
		fmt.Fprintf(stderr, "doxlab load: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "captured %s (%s, %s): %d resources from %d hosts, PLT %.1f ms, onload gap %.1f ms -> %s\n",
		page, b.Version(), buildinfo.Version(), len(g.Resources), len(g.Hosts()), g.PLTMs, g.OnloadGapMs, out)
	return exitOK
}

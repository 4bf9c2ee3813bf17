package cli

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/internal/suggest"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/transport"
)

// queryExit maps a failed exchange's status to the exit code of
// 'doxlab query', so scripts can branch on the cause. Any answer, whatever
// its rcode, exits 0, as dig does.
var queryExit = map[transport.Status]int{
	transport.StatusTimeout:    10,
	transport.StatusClosed:     11,
	transport.StatusRefused:    12,
	transport.StatusUnreach:    13,
	transport.StatusResolve:    14,
	transport.StatusTLS:        15,
	transport.StatusCert:       16,
	transport.StatusQUIC:       17,
	transport.StatusHTTP:       18,
	transport.StatusMalformed:  19,
	transport.StatusCanceled:   20,
	transport.StatusError:      21,
	transport.StatusReset:      22,
	transport.StatusBlocked:    23,
	transport.StatusBadRequest: exitUsage,
}

type queryFlags struct {
	json, reuse, resume, zeroRTT, tokens, pinVersion, padding bool
	insecure, dohJSON, doqDrafts, noRD, dnssec, warmup        bool
	httpsRecord                                               bool
	repeat                                                    int
	interval, timeout                                         time.Duration
	httpVersion, method, sni, ca, local, qlog, quicVersion    string
}

func (f *queryFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.json, "json", false, "print one JSON object per exchange, one per line")
	fs.IntVar(&f.repeat, "repeat", 1, "send the query `N` times")
	fs.DurationVar(&f.interval, "interval", 0, "pause between repeated queries")
	fs.BoolVar(&f.reuse, "reuse", false, "keep one connection open for all queries (default: a fresh connection per query)")
	fs.BoolVar(&f.resume, "resume", false, "keep TLS session tickets so later connections resume")
	fs.BoolVar(&f.zeroRTT, "0rtt", false, "send DoQ queries and DoH/3 GETs as 0-RTT early data when a ticket allows (implies --resume)")
	fs.BoolVar(&f.tokens, "tokens", false, "reuse QUIC NEW_TOKEN tokens so later connections skip Retry (implied by --resume)")
	fs.BoolVar(&f.pinVersion, "pin-version", false, "offer only the QUIC version learned on the first connection (implied by --resume)")
	fs.BoolVar(&f.warmup, "warmup", false, "send one unreported cache-warming query first, on its own connection; it also fetches the ticket, token and version later connections reuse")
	fs.BoolVar(&f.padding, "padding", false, "pad queries with EDNS(0) to 128-octet blocks (RFC 8467)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "bound on each exchange, handshakes included")
	fs.StringVar(&f.httpVersion, "http", "2", "HTTP version for https:// URLs: 1.1, 2 or 3")
	fs.StringVar(&f.method, "method", "get", "DoH method: get or post")
	fs.BoolVar(&f.dohJSON, "doh-json", false, "use the DoH JSON API (application/dns-json)")
	fs.StringVar(&f.sni, "sni", "", "server name to send and verify (default: the URL's host)")
	fs.StringVar(&f.ca, "ca", "", "verify the server against the PEM certificates in `FILE`")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the server's certificate")
	fs.StringVar(&f.local, "local", "", "bind to this local `address` (ip, :port or ip:port)")
	fs.StringVar(&f.qlog, "qlog", "", "write a qlog file per QUIC connection into `DIR` (default: $QLOGDIR)")
	fs.StringVar(&f.quicVersion, "quic-version", "", "offer only this QUIC version: v1 or v2")
	fs.BoolVar(&f.doqDrafts, "doq-drafts", false, "also offer the DoQ draft ALPNs doq-i11 ... doq-i00")
	fs.BoolVar(&f.noRD, "norecurse", false, "clear the RD bit")
	fs.BoolVar(&f.dnssec, "dnssec", false, "set the DO bit")
	fs.BoolVar(&f.httpsRecord, "https-record", false, "first ask the server for its own name's HTTPS record (--sni or the URL's host) and offer the record's ECH config (ech=) on every measured handshake, as a client bootstrapping ECH does")
}

const queryUsage = `usage: doxlab query [flags] URL NAME [TYPE]

URL picks the transport:
  udp://host[:53]  tcp://host[:53]  tls://host[:853]  quic://host[:853]
  https://host[:443][/path]  (DoH; --http 1.1|2|3)   h3://host[:443][/path]  (DoH over HTTP/3)

flags:
`

// parseArgs parses flags and positional arguments for a command whose -h
// is not an error: ok is false when the command must exit with code.
func parseArgs(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	pos, err := parseInterleaved(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, exitOK, false
	case err != nil:
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// parseInterleaved parses flags wherever they stand among the
// positional arguments. A bad flag gets one line, with the flag a typo
// was probably meant to be ("did you mean --profiles?") and what a
// duration wants, instead of the whole usage; -h prints the usage.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	out, usage := fs.Output(), fs.Usage
	if usage == nil {
		usage = func() { fmt.Fprintf(out, "usage of doxlab %s:\n", fs.Name()); fs.PrintDefaults() }
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			fs.SetOutput(out)
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, err
			}
			fmt.Fprintf(out, "doxlab %s: %s (doxlab %s --help lists the flags)\n", fs.Name(), explainFlagError(fs, err), fs.Name())
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// explainFlagError says what was wrong with a flag in terms a newcomer
// can act on.
func explainFlagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		s := fmt.Sprintf("unknown flag --%s", name)
		if near := suggest.Nearest(strings.TrimLeft(name, "-"), names, 1, true); len(near) > 0 {
			s += fmt.Sprintf(" (did you mean --%s?)", near[0])
		}
		return s
	}
	// invalid value "3" for flag -duration: parse error
	var val, name string
	if _, e := fmt.Sscanf(msg, "invalid value %q for flag -%s", &val, &name); e == nil {
		name = strings.TrimSuffix(name, ":")
		if f := fs.Lookup(name); f != nil && fmt.Sprintf("%T", f.Value) == "*flag.durationValue" {
			if _, e := strconv.ParseFloat(val, 64); e == nil {
				return fmt.Sprintf("--%s %s: missing unit (e.g. %ss or %sms)", name, val, val, val)
			}
			return fmt.Sprintf("--%s %q: not a duration (e.g. 3s, 500ms, 2m)", name, val)
		}
		return fmt.Sprintf("--%s %q: %s", name, val, strings.TrimSpace(msg[strings.LastIndex(msg, ":")+1:]))
	}
	return strings.Replace(msg, "flag needs an argument: -", "flag needs a value: --", 1)
}

// maxQueryRepeat bounds --repeat: query keeps every total for its
// summary, 8 octets each.
const maxQueryRepeat = 1_000_000

func runQuery(args []string, stdout, stderr io.Writer) int {
	var f queryFlags
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, queryUsage); fs.PrintDefaults() }
	f.register(fs)
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab query: "+format+"\n", a...)
		return exitUsage
	}
	if len(pos) < 2 || len(pos) > 3 {
		return fail("want URL NAME [TYPE], got %d arguments (see doxlab query -h)", len(pos))
	}
	if f.repeat < 1 || f.repeat > maxQueryRepeat {
		return fail("--repeat must be from 1 to %d (a load is doxlab bench's)", maxQueryRepeat)
	}
	if f.interval < 0 {
		return fail("--interval must be 0 or more")
	}
	q, err := buildQuery(pos[1], pos[2:], !f.noRD, f.dnssec)
	if err != nil {
		return fail("%v", err)
	}
	opts, err := f.options()
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if f.httpsRecord {
		if opts.ECHConfigList, err = ownECHConfig(ctx, pos[0], opts, f.json, stderr); err != nil {
			return fail("--https-record: %v", err)
		}
	}
	t, err := transport.New(pos[0], opts)
	if err != nil {
		return fail("%v", err)
	}
	defer t.Close()

	out := newPrinter(stdout, f.json)
	if f.warmup {
		// The warm-up runs on its own connection, as in the PAM paper's method.
		wt, _ := transport.New(pos[0], withoutReuse(opts))
		rec, _ := wt.Exchange(ctx, q)
		wt.Close()
		rec.Warmup = true
		if f.json {
			out.print(rec)
		}
	}
	code = exitOK
	var totals []float64
	for i := 0; i < f.repeat && ctx.Err() == nil; i++ {
		if i > 0 && f.interval > 0 {
			select {
			case <-time.After(f.interval):
			case <-ctx.Done():
			}
		}
		rec, err := t.Exchange(ctx, q)
		out.print(rec)
		if err != nil {
			if code == exitOK {
				code = queryExit[rec.Status]
			}
			if !f.json {
				fmt.Fprintf(stderr, "doxlab query: %s: %s: %s\n", pos[0], rec.Status, rec.Error)
			}
			continue
		}
		totals = append(totals, rec.Timing.TotalMs)
	}
	if !f.json && f.repeat > 1 && len(totals) > 0 {
		s := stats.Summarize(totals)
		fmt.Fprintf(stdout, ";; %d/%d answered; total ms min %.3f median %.3f %s max %.3f\n",
			len(totals), f.repeat, slices.Min(totals), s.Median, s.CI(3), slices.Max(totals))
	}
	return code
}

// ownECHConfig asks the server at url, on a connection of its own and
// in clear (a first visit has nothing else), for the HTTPS record of its
// own name and returns the record's ECH config.
func ownECHConfig(ctx context.Context, url string, opts transport.Options, quiet bool, stderr io.Writer) ([]byte, error) {
	ep, err := transport.ParseURL(url)
	if err != nil {
		return nil, err
	}
	name := cmp.Or(opts.SNI, ep.Host)
	if net.ParseIP(name) != nil {
		return nil, fmt.Errorf("%s is an address, which has no HTTPS record: name the server with --sni", name)
	}
	t, err := transport.New(url, withoutReuse(opts))
	if err != nil {
		return nil, err
	}
	defer t.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeHTTPS)
	rec, err := t.Exchange(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("asking %s's HTTPS record: %s", name, rec.Error)
	}
	list := ech.InAnswer(rec.Response.Answer)
	cs, err := ech.Parse(list)
	if err != nil || len(cs) == 0 {
		return nil, fmt.Errorf("%s's HTTPS record has no usable ECH config (ech=)", name)
	}
	if !quiet {
		fmt.Fprintf(stderr, ";; ECH config from %s's HTTPS record: public name %s\n", name, cs[0].PublicName)
	}
	return list, nil
}

func withoutReuse(o transport.Options) transport.Options {
	o.Reuse = false
	return o
}

// buildQuery makes the query message for NAME [TYPE].
func buildQuery(name string, typ []string, rd, do bool) (*dns.Msg, error) {
	qtype := dns.TypeA
	if len(typ) == 1 {
		t, ok := dnswire.ParseType(typ[0])
		if !ok {
			return nil, fmt.Errorf("unknown record type %q", typ[0])
		}
		qtype = t
	}
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return nil, fmt.Errorf("bad domain name %q", name)
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.RecursionDesired = rd
	if do {
		q.SetEdns0(1232, true)
	}
	return q, nil
}

func (f *queryFlags) options() (transport.Options, error) {
	o := transport.Options{
		Timeout: f.timeout, Reuse: f.reuse, ZeroRTT: f.zeroRTT, Padding: f.padding,
		HTTPVersion: f.httpVersion, Method: strings.ToLower(f.method), JSON: f.dohJSON,
		SNI: f.sni, Insecure: f.insecure, LocalAddr: f.local, QlogDir: f.qlog,
	}
	if f.timeout <= 0 {
		return o, fmt.Errorf("--timeout %v: want a positive duration", f.timeout)
	}
	resume := f.resume || f.zeroRTT
	if resume || f.tokens || f.pinVersion {
		o.Session = transport.NewSession(transport.SessionConfig{
			Tickets: resume, Tokens: resume || f.tokens, Versions: resume || f.pinVersion,
		})
	}
	if f.ca != "" {
		var err error
		if o.RootCAs, err = loadCA(f.ca); err != nil {
			return o, err
		}
	}
	switch strings.ToLower(f.quicVersion) {
	case "":
	case "v1", "1":
		o.QUICVersions = []quic.Version{quic.Version1}
	case "v2", "2":
		o.QUICVersions = []quic.Version{quic.Version2}
	default:
		return o, fmt.Errorf("unknown --quic-version %q (want v1 or v2)", f.quicVersion)
	}
	if f.doqDrafts {
		o.DoQALPNs = append([]string{"doq"}, transport.DraftDoQALPNs...)
	}
	return o, nil
}

type printer struct {
	w    io.Writer
	json bool
	enc  *json.Encoder
}

func newPrinter(w io.Writer, asJSON bool) *printer {
	return &printer{w: w, json: asJSON, enc: json.NewEncoder(w)}
}

func (p *printer) print(r *transport.Record) {
	if p.json {
		p.enc.Encode(r)
		return
	}
	w := p.w
	fmt.Fprintf(w, ";; %s  %s %s  status %s", r.URL, r.QName, r.QType, r.Status)
	if r.Rcode != "" {
		fmt.Fprintf(w, "  rcode %s", r.Rcode)
	}
	fmt.Fprintln(w)
	for _, a := range r.Answers {
		fmt.Fprintln(w, a)
	}
	t := r.Timing
	fmt.Fprintf(w, ";; timing ms: socket %s  connect %s  handshake %s  query %s (starts at %.3f)  total %.3f\n",
		opt(t.SocketMs), opt(t.ConnectMs), opt(t.HandshakeMs), opt(t.QueryMs), t.QueryStartMs, t.TotalMs)
	if t.WireMs > 0 {
		fmt.Fprintf(w, ";; on the wire ms (kernel timestamps): first packet out to answer in %.3f  query out to answer in %s  (client's own time %.3f)\n",
			t.WireMs, opt(t.WireQueryMs), t.TotalMs-t.WireMs)
	}
	c := r.Conn
	conn := "new"
	if c.Reused {
		conn = "reused"
	}
	fmt.Fprintf(w, ";; conn: %s  %s -> %s", conn, orDash(c.LocalAddr), orDash(c.RemoteAddr))
	if c.TLSVersion != "" {
		fmt.Fprintf(w, "  TLS %s %s  alpn %s  resumed %s", c.TLSVersion, c.Cipher, orDash(c.ALPN), yn(c.TLSResumed))
	}
	if c.ECH != "" {
		fmt.Fprintf(w, "  ECH %s", c.ECH)
	}
	if c.QUICVersion != "" {
		zero := "no"
		switch {
		case c.Used0RTT:
			zero = "accepted"
		case c.Rejected0RTT:
			zero = "rejected"
		case c.Attempted0RTT:
			zero = "attempted"
		}
		fmt.Fprintf(w, "\n;; quic: %s  0-RTT %s  retry %s  version negotiation %s  token used %s", c.QUICVersion, zero, yn(c.Retry), yn(c.VersionNeg), yn(c.TokenUsed))
	}
	if c.HTTPStatus != 0 {
		fmt.Fprintf(w, "  HTTP %d", c.HTTPStatus)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, ";; bytes sent %d received %d (DNS %d/%d)  packets sent %d received %d\n",
		r.Bytes.Sent, r.Bytes.Received, r.DNSBytes.Sent, r.DNSBytes.Received, r.Packets.Sent, r.Packets.Received)
	if o := r.ODoH; o != nil {
		fmt.Fprintf(w, ";; odoh: target %s  proxy to target %s ms  seal %.3f ms  open %.3f ms  sealed %d/%d", o.Target, opt(o.TargetMs), o.SealMs, o.OpenMs, o.Sealed.Sent, o.Sealed.Received)
		if o.ConfigMs > 0 {
			fmt.Fprintf(w, "  config fetched first %.3f ms", o.ConfigMs)
		}
		fmt.Fprintln(w)
	}
	if c.DelayedACKStall {
		fmt.Fprintf(w, ";; warning: the answer's tail came %.1f ms after its head: the server's Nagle held it for our delayed ACK, a server setting, not protocol cost\n", r.Timing.AnswerSpreadMs)
	}
	fmt.Fprintln(w)
}

func opt(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yn(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// loadCA reads PEM certificates to verify servers against (--ca).
func loadCA(path string) (*x509.CertPool, error) {
	pool, err := transport.LoadCA(path)
	if err != nil {
		return nil, fmt.Errorf("reading --ca: %w", err)
	}
	return pool, nil
}

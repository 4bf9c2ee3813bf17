package measure

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/printable"
	"github.com/doxlab/doxlab/internal/specfile"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/transport"
)

// Campaign is a measurement spec in YAML: targets × transports ×
// conditions × repetitions, and how to run them.
//
//	name: pam-resolvers
//	targets: [10.200.0.2, "quic://dns.example:853"]
//	targets_file: resolvers.txt
//	transports: [udp, tcp, dot, doh2, doh3, doq]
//	conditions: [fresh, pam, resumed, 0rtt]
//	query: {name: test.com, type: A, rd: true}
//	repeat: 3
//	timeout: 5s
//	retries: 1
//	concurrency: 4
//	rate: 10
//	seed: 42
//	tls: {ca: ca.pem, insecure: false, sni: ""}
//	store: doxlab.db
//	vantages:                 # for campaign plan and workers
//	  - {name: fra1, location: "Frankfurt, DE", network: Telekom, asn: 3320}
//	  - {name: nyc1, targets: [10.0.0.53]}   # a resolver set of its own
//	every: 48h                # a planned campaign measured again, in rounds
//	rounds: 4                 # every 48 h for a week
//	pages:                    # page loads instead of DNS exchanges (IMC 2022)
//	  urls: [https://www.wikipedia.org/]
//	  tranco: top-1m.csv      # rank,domain lines; the first top of them
//	  top: 10
//	  timeout: 30s            # per navigation
//	contact: https://lab.example/dns-study   # in every page load's User-Agent
//	blocklist: [block.txt]    # prefixes never contacted (as doxlab scan's)
//	opt_out: [opt-out.txt]
//	allow_special: [10.200.0.0/24]  # a lab's private addresses, refused otherwise
type Campaign struct {
	Name        string        `yaml:"name"`
	Targets     []string      `yaml:"targets"`
	TargetsFile string        `yaml:"targets_file"`
	Transports  []string      `yaml:"transports"`
	Conditions  []string      `yaml:"conditions"`
	Query       CampaignQuery `yaml:"query"`
	Repeat      int           `yaml:"repeat"`
	Timeout     time.Duration `yaml:"timeout"`
	Retries     int           `yaml:"retries"`
	Concurrency int           `yaml:"concurrency"`
	Rate        float64       `yaml:"rate"`
	Seed        uint64        `yaml:"seed"`
	TLS         CampaignTLS   `yaml:"tls"`
	Store       string        `yaml:"store"`
	// Vantages are where a planned campaign measures from: each has its
	// own queue of tasks, taken by that vantage point's workers.
	Vantages []CampaignVantage `yaml:"vantages"`
	// Every and Rounds repeat a planned campaign: Rounds rounds, the k-th
	// (from 1) due Every × (k-1) after planning, each task measured once
	// per round and labelled with it.
	Every  time.Duration `yaml:"every"`
	Rounds int           `yaml:"rounds"`
	// Pages, if set, make the campaign's tasks page loads: each page ×
	// target × transport × repetition.
	Pages *CampaignPages `yaml:"pages"`
	// Contact identifies the measurement to those it reaches (a URL or
	// a mail address): page loads send it in the User-Agent.
	Contact string `yaml:"contact"`
	// Blocklist and OptOut are prefix files (doxlab scan's): no address
	// in them is contacted, host-name targets included.
	Blocklist []string `yaml:"blocklist"`
	OptOut    []string `yaml:"opt_out"`
	// AllowSpecial are special-purpose prefixes (RFC 6890: loopback,
	// link-local and cloud metadata, private networks, CGNAT, ULA, ...)
	// the campaign may contact: none by default, so that no target, page,
	// answer or subresource leads a vantage point into its own networks.
	// A campaign on a testbed or in a lab names its prefixes here. The
	// blocklist and opt-outs win over it.
	AllowSpecial []string `yaml:"allow_special"`
}

// CampaignPages are the pages a page-load campaign loads: a list, a file
// of URLs, and the top of a Tranco list.
type CampaignPages struct {
	URLs   []string `yaml:"urls"`
	File   string   `yaml:"file"`   // a URL a line, # comments
	Tranco string   `yaml:"tranco"` // a Tranco list: rank,domain lines
	Top    int      `yaml:"top"`    // how many of the Tranco list, from its top; default 10
	// Timeout bounds each navigation; default 30 s.
	Timeout time.Duration `yaml:"timeout"`
	// Stub is what the stub keeps between its upstream connections (a
	// condition: fresh, pam, resumed, 0rtt), or reuse: one connection
	// for all. Default 0rtt: a new connection per query resuming with
	// the warm-up's ticket, token and QUIC version, 0-RTT where the
	// server takes it, as the paper's proxy did.
	Stub string `yaml:"stub"`
	// Queries bounds the DNS queries a page's warm-up and measured load
	// send its resolver through the stub, together; past them the stub
	// refuses each at once and the load is stored as blocked. Default
	// DefaultPageQueries. A page asks as many as its script likes, and
	// every one goes from the vantage point to the resolver measured.
	Queries int `yaml:"queries"`
}

// DefaultPageQueries is a page's bound on DNS queries through the stub
// (CampaignPages.Queries): a page of a hundred origins asks about 600
// over its warm-up and load (A, AAAA and HTTPS for each name, twice).
const DefaultPageQueries = 2000

// MaxPages is the most pages a campaign loads.
const MaxPages = 10000

// List is the pages' URLs: the list, the file's, then the Tranco list's
// top, each once, checked.
func (p *CampaignPages) List() ([]string, error) {
	out := slices.Clone(p.URLs)
	if p.File != "" {
		more, err := readList(p.File, CheckPage)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	if p.Tranco != "" {
		top, err := Tranco(p.Tranco, cmp.Or(p.Top, 10))
		if err != nil {
			return nil, err
		}
		out = append(out, top...)
	}
	seen := map[string]bool{}
	out = slices.DeleteFunc(out, func(u string) bool { d := seen[u]; seen[u] = true; return d })
	for _, u := range out {
		if err := CheckPage(u); err != nil {
			return nil, fmt.Errorf("page %q: %w", u, err)
		}
	}
	switch {
	case len(out) == 0:
		return nil, fmt.Errorf("no pages (give urls, file or tranco)")
	case len(out) > MaxPages:
		return nil, fmt.Errorf("%d pages, more than %d", len(out), MaxPages)
	}
	return out, nil
}

// Tranco reads the first top domains of a Tranco list (rank,domain a
// line, as tranco-list.eu serves it) as https:// home-page URLs.
func Tranco(path string, top int) ([]string, error) {
	var out []string
	err := listfile.Each(path, func(_ int, line string) error {
		if len(out) == top {
			return errTop
		}
		rank, domain, ok := strings.Cut(line, ",")
		if _, err := strconv.Atoi(strings.TrimSpace(rank)); !ok || err != nil {
			return fmt.Errorf("not a Tranco line (rank,domain): %q", printable.String(line[:min(len(line), 64)]))
		}
		u := "https://" + strings.TrimSpace(domain) + "/"
		if err := CheckPage(u); err != nil {
			return err
		}
		out = append(out, u)
		return nil
	})
	if errors.Is(err, errTop) { // the rest of a million lines unread
		err = nil
	}
	return out, err
}

// errTop ends reading a Tranco list at its top.
var errTop = errors.New("top read")

// CheckPage accepts an absolute http or https URL of a host (a name or
// an address), of at most MaxTarget octets, without credentials.
func CheckPage(u string) error {
	if len(u) > MaxTarget {
		return fmt.Errorf("longer than %d octets", MaxTarget)
	}
	if strings.ContainsFunc(u, unicode.IsControl) {
		return fmt.Errorf("has control characters")
	}
	pu, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL")
	case pu.Scheme != "https" && pu.Scheme != "http":
		return fmt.Errorf("not an http or https URL")
	case pu.User != nil:
		return fmt.Errorf("has credentials")
	case pu.Hostname() == "":
		return fmt.Errorf("has no host")
	}
	if net.ParseIP(pu.Hostname()) == nil {
		if _, ok := dns.IsDomainName(pu.Hostname()); !ok || strings.ContainsAny(pu.Hostname(), " /") {
			return fmt.Errorf("bad host %q", pu.Hostname())
		}
	}
	if _, _, err := hostAddr(pu.Hostname()); err != nil {
		return fmt.Errorf("bad host: %w", err)
	}
	return nil
}

// MaxRounds is the most rounds a campaign is planned in.
const MaxRounds = 1000

// MaxSpan is the longest a campaign's rounds may span, every × (rounds
// - 1): far past any study, and well inside what time.Duration holds
// (292 years, past which a round's due time wraps into the past and
// every round would be due at once).
const MaxSpan = 20 * 366 * 24 * time.Hour

// CampaignVantage is one vantage point of a campaign, with the resolvers
// it measures if they are its own (else the campaign's).
type CampaignVantage struct {
	Vantage     `yaml:",inline"`
	Targets     []string `yaml:"targets"`
	TargetsFile string   `yaml:"targets_file"`
}

// vantageName is what a queue name allows (River's rule): lower-case
// letters and digits, single - or _ between them.
var vantageName = regexp.MustCompile(`^[a-z0-9]+(?:[_-][a-z0-9]+)*$`)

// CheckVantageName accepts a name a vantage point's queue can carry.
func CheckVantageName(name string) error {
	if len(name) > 48 || !vantageName.MatchString(name) {
		return fmt.Errorf("vantage name %q: want at most 48 lower-case letters and digits, with single - or _ between them", name)
	}
	return nil
}

// CampaignQuery is the question asked.
type CampaignQuery struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
	RD   *bool  `yaml:"rd"`
}

// CampaignTLS is how servers are verified.
type CampaignTLS struct {
	CA       string `yaml:"ca"`
	Insecure bool   `yaml:"insecure"`
	SNI      string `yaml:"sni"`
}

// LoadCampaign reads and checks a campaign. Every error names the file,
// the line and the field, and comes before anything is measured.
func LoadCampaign(path string) (*Campaign, error) {
	b, err := listfile.Read(path)
	if err != nil {
		return nil, err
	}
	var c Campaign
	f := specfile.Decode(path, b, &c)
	check := &campaignCheck{c: &c, f: f}
	bad := check.bad
	if err := CheckLabel(c.Name); err != nil {
		bad("name", "%v", err)
	}
	check.vantages()
	ownTargets := len(c.Vantages) > 0 && !slices.ContainsFunc(c.Vantages, func(v CampaignVantage) bool { return len(v.Targets) == 0 && v.TargetsFile == "" })
	if len(c.Targets) == 0 && c.TargetsFile == "" && !ownTargets && !f.Failed("vantages") {
		bad("targets", "no targets (give targets or targets_file)")
	}
	for k, t := range c.Targets {
		if err := CheckTarget(t); err != nil {
			bad(fmt.Sprintf("targets[%d]", k+1), "%q: %v", t, err)
		}
	}
	for k, t := range c.Transports {
		if _, ok := protocol.Lookup(t); !ok {
			bad(fmt.Sprintf("transports[%d]", k+1), "%v", unknownTransport(t))
		}
	}
	for k, cn := range c.Conditions {
		if _, ok := Conditions[cn]; !ok {
			bad(fmt.Sprintf("conditions[%d]", k+1), "unknown condition %q (want fresh, pam, resumed or 0rtt)", cn)
		}
	}
	if c.Query.Type != "" {
		if _, ok := dnswire.ParseType(c.Query.Type); !ok {
			bad("query.type", "unknown record type %q", c.Query.Type)
		}
	}
	if c.Query.Name != "" {
		if _, ok := dns.IsDomainName(c.Query.Name); !ok {
			bad("query.name", "bad name %q", c.Query.Name)
		}
	}
	check.numbers()
	if c.TLS.CA != "" {
		if _, err := os.Stat(c.TLS.CA); err != nil {
			bad("tls.ca", "%v", err)
		}
	}
	if err := CheckLabel(c.Contact); err != nil {
		bad("contact", "%v", err)
	}
	if _, err := blocklist.Read(c.Blocklist...); err != nil {
		bad("blocklist", "%v", err)
	}
	if _, err := blocklist.Read(c.OptOut...); err != nil {
		bad("opt_out", "%v", err)
	}
	if _, err := blocklist.ParseAllow(c.AllowSpecial); err != nil {
		bad("allow_special", "%v", err)
	}
	if err := c.Reachable(c.Targets); err != nil && !f.Failed("allow_special") {
		bad("targets", "%v", err)
	}
	check.pages()
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// campaignCheck checks a decoded campaign: each check adds its error
// and goes on, so that one pass names them all; a field whose shape was
// wrong is not checked again.
type campaignCheck struct {
	c *Campaign
	f *specfile.File
}

func (k *campaignCheck) bad(field, format string, a ...any) {
	if !k.f.Failed(field) {
		k.f.Bad(field, format, a...)
	}
}

// vantages checks each vantage point: its name (once), labels, ASN and
// targets.
func (k *campaignCheck) vantages() {
	c, bad := k.c, k.bad
	seen := map[string]bool{}
	for i, v := range c.Vantages {
		at := fmt.Sprintf("vantages[%d]", i+1)
		if err := CheckVantageName(v.Name); err != nil {
			bad(at+".name", "%v", err)
		}
		for field, s := range map[string]string{"location": v.Location, "network": v.Network, "address": v.Address} {
			if err := CheckLabel(s); err != nil {
				bad(at+"."+field, "%v", err)
			}
		}
		if seen[v.Name] {
			bad(at+".name", "%q named twice", v.Name)
		}
		seen[v.Name] = true
		for k, t := range v.Targets {
			if err := CheckTarget(t); err != nil {
				bad(fmt.Sprintf("%s.targets[%d]", at, k+1), "%q: %v", t, err)
			}
		}
		if v.ASN < 0 {
			bad(at+".asn", "%d is negative", v.ASN)
		}
		if err := c.Reachable(v.Targets); err != nil {
			bad(at+".targets", "%v", err)
		}
	}
}

// numbers checks the counts, rates and durations, rounds with every.
func (k *campaignCheck) numbers() {
	c, f, bad := k.c, k.f, k.bad
	if c.Repeat < 0 {
		bad("repeat", "%d is negative", c.Repeat)
	}
	if c.Retries < 0 || c.Retries > 10 {
		bad("retries", "%d is not 0..10", c.Retries)
	}
	if c.Concurrency < 0 || c.Concurrency > MaxConcurrency {
		bad("concurrency", "%d is not 0 (one) to %d", c.Concurrency, MaxConcurrency)
	}
	if p := rateProblem(c.Rate); p != "" {
		bad("rate", "%s", p)
	}
	if c.Timeout < 0 {
		bad("timeout", "%v is negative", c.Timeout)
	}
	if c.Every < 0 {
		bad("every", "%v is negative", c.Every)
	}
	switch {
	case c.Rounds < 0 || c.Rounds > MaxRounds:
		bad("rounds", "%d is not 1..%d", c.Rounds, MaxRounds)
	case c.Rounds > 1 && c.Every == 0 && !f.Failed("every"):
		bad("rounds", "%d rounds need every: the time between them (e.g. every: 48h)", c.Rounds)
	case c.Every > 0 && c.Rounds == 0 && !f.Failed("rounds"):
		bad("every", "say how many rounds (rounds: N) the campaign is measured in")
	case c.Rounds > 1 && len(c.Vantages) == 0 && !f.Failed("vantages"):
		bad("rounds", "rounds are planned for workers: name the vantages (campaign plan), or run one round here")
	case c.Rounds > 1 && c.Every > MaxSpan/time.Duration(c.Rounds-1):
		bad("every", "%v between %d rounds spans %.0f years, more than %.0f", c.Every, c.Rounds,
			c.Every.Hours()*float64(c.Rounds-1)/(366*24), MaxSpan.Hours()/(366*24))
	}
}

// pages checks a page-load campaign's pages section.
func (k *campaignCheck) pages() {
	c, bad := k.c, k.bad
	if p := c.Pages; p != nil {
		if len(c.Conditions) > 0 {
			bad("conditions", "page loads take no conditions (pages.stub says what the stub keeps)")
		}
		if list, err := p.List(); err != nil {
			bad("pages", "%v", err)
		} else if err := c.Reachable(list); err != nil {
			bad("pages", "%v", err)
		}
		if _, ok := Conditions[p.Stub]; !ok && p.Stub != "" && p.Stub != "reuse" {
			bad("pages.stub", "%q is not fresh, pam, resumed, 0rtt or reuse", p.Stub)
		}
		if p.Timeout < 0 {
			bad("pages.timeout", "%v is negative", p.Timeout)
		}
		if p.Top < 0 {
			bad("pages.top", "%d is negative", p.Top)
		}
		if p.Queries < 0 {
			bad("pages.queries", "%d is negative", p.Queries)
		}
		if c.Contact == "" {
			bad("contact", "a page-load campaign says who measures: give contact (a URL or mail address, sent in the User-Agent)")
		}
	}
}

// MaxTarget is the longest target accepted, in octets: room for any
// server URL, far below what a job or an index row can carry (PostgreSQL
// refused a 9,000-octet target mid-run: "index row requires 9096 bytes").
const MaxTarget = 1024

// MaxLabel is the longest free-text label (a campaign's name, a vantage
// point's location or network).
const MaxLabel = 200

// CheckLabel accepts free text of at most MaxLabel octets without
// control characters: it reaches terminals, CSV files and job rows.
func CheckLabel(s string) error {
	switch {
	case len(s) > MaxLabel:
		return fmt.Errorf("longer than %d octets", MaxLabel)
	case !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("has control characters or is not UTF-8")
	}
	return nil
}

// CheckTarget accepts a host name, an IP address or a server URL, of at
// most MaxTarget octets.
func CheckTarget(t string) error {
	if len(t) > MaxTarget {
		return fmt.Errorf("longer than %d octets", MaxTarget)
	}
	if strings.ContainsFunc(t, unicode.IsControl) {
		return fmt.Errorf("has control characters")
	}
	if strings.Contains(t, "://") {
		_, err := transport.ParseURL(t)
		return err
	}
	if net.ParseIP(strings.Trim(t, "[]")) != nil {
		return nil
	}
	if !hostname(t) {
		return fmt.Errorf("not a host, IP address or server URL")
	}
	return nil
}

// hostname says whether s is a host name as a URL carries it: labels of
// ASCII letters, digits, - and _, dots between them (and one at the end).
// DNS names may hold any octet, but a target becomes a URL at each
// vantage point (URLFor), where a # or ? ended the host and a % was
// decoded: "a?b" was measured as host a, and "a#b" failed every task.
func hostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Apply puts the question into s.
func (q CampaignQuery) Apply(s *Spec) {
	s.Name = q.Name
	if q.Type != "" {
		s.Type, _ = dnswire.ParseType(q.Type) // checked by LoadCampaign
	}
	if q.RD != nil {
		s.NoRD = !*q.RD
	}
}

// Spec is the measurement the campaign asks for, on one machine: its
// targets with those of its targets file, its CA read.
func (c *Campaign) Spec() (Spec, error) {
	targets, err := Targets(c.Targets, c.TargetsFile)
	if err != nil {
		return Spec{}, err
	}
	s := Spec{Targets: targets, Transports: c.Transports, Conditions: c.Conditions, Repeat: c.Repeat, Timeout: c.Timeout,
		Retries: c.Retries, Concurrency: c.Concurrency, Rate: c.Rate, Seed: c.Seed,
		Options: transport.Options{Insecure: c.TLS.Insecure, SNI: c.TLS.SNI}}
	c.Query.Apply(&s)
	if c.TLS.CA != "" {
		if s.Options.RootCAs, err = transport.LoadCA(c.TLS.CA); err != nil {
			return Spec{}, fmt.Errorf("tls: ca: %w", err)
		}
	}
	if c.Pages != nil {
		if s.Pages, err = c.Pages.List(); err != nil {
			return Spec{}, err
		}
		if len(s.Transports) == 0 {
			s.Transports = PageTransports
		}
	}
	if err := c.Reachable(s.Targets); err != nil {
		return Spec{}, err
	}
	policy, err := c.Policy()
	if err != nil {
		return Spec{}, err
	}
	s.Options.Refuse = policy.Check
	return s, nil
}

// PageTransports are a page-load campaign's DNS protocols by default: the
// IMC 2022 study's DoUDP, DoH and DoQ.
var PageTransports = []string{protocol.UDP, protocol.DoH2, protocol.DoQ}

// Blocked is the campaign's blocklist and opt-out files, read.
func (c *Campaign) Blocked() (*blocklist.List, error) {
	return blocklist.Read(append(slices.Clone(c.Blocklist), c.OptOut...)...)
}

// Policy is where the campaign may send traffic: not into its blocklist
// and opt-outs, and into special-purpose blocks only as allow_special says.
func (c *Campaign) Policy() (*blocklist.Policy, error) {
	block, err := c.Blocked()
	if err != nil {
		return nil, err
	}
	allow, err := blocklist.ParseAllow(c.AllowSpecial)
	if err != nil {
		return nil, fmt.Errorf("allow_special: %w", err)
	}
	return &blocklist.Policy{Block: block, Allow: allow}, nil
}

// Reachable refuses targets or pages (host names, addresses, server or
// page URLs) whose address is written out and special-purpose, unless
// allow_special allows it: said when the campaign is read, rather than
// as a run of blocked tasks. Names are judged once resolved, as each
// task contacts them; blocklisted addresses are stored as blocked tasks.
func (c *Campaign) Reachable(list []string) error {
	allow, err := blocklist.ParseAllow(c.AllowSpecial)
	if err != nil {
		return err
	}
	p := &blocklist.Policy{Allow: allow}
	for _, t := range list {
		a, ok := literalAddr(t)
		if !ok {
			continue
		}
		if err := p.Check(a); err != nil {
			return fmt.Errorf("%q: %w", t, err)
		}
	}
	return nil
}

// literalAddr is the address a target or page names, if it names one
// rather than a host name: as a browser reads its host (hostAddr), so
// that https://127.1/ is refused as the loopback address Chromium takes
// it for.
func literalAddr(t string) (netip.Addr, bool) {
	host := t
	if strings.Contains(t, "://") {
		u, err := url.Parse(t)
		if err != nil {
			return netip.Addr{}, false
		}
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(t); err == nil {
		host = h
	}
	a, ok, err := hostAddr(host)
	return a, ok && err == nil
}

// hostAddr is the address a URL's host is, as the URL Standard (and so
// Chromium and Firefox) reads it: an IPv6 literal; else the host mapped
// as IDNA's UTS #46 maps it (fullwidth digits to digits, ⓛ to l); then an
// IPv4 address in any of the forms inet_aton took, which a browser still
// takes (127.1, 2130706433, 0x7f.0.0.1, 0177.0.0.1, 127.0.0.1. with its
// dot) where Go sees a name; and localhost and its subdomains, which a
// browser takes for loopback without asking DNS (RFC 6761), 127.0.0.1.
// A host whose last label is a number but no IPv4 address (1.2.3.256),
// or that IDNA refuses, is an error: a browser refuses the URL.
func hostAddr(host string) (netip.Addr, bool, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a.WithZone(""), true, nil
	}
	mapped, err := browserIDNA.ToASCII(host)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("%q is no host a browser reads: %w", host, err)
	}
	host = strings.ToLower(mapped)
	if name := strings.TrimSuffix(host, "."); name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true, nil
	}
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if _, err := ipv4Number(last); last == "" || err != nil && strings.Trim(last, "0123456789") != "" {
		return netip.Addr{}, false, nil // a name
	}
	bad := fmt.Errorf("%q ends in a number but is no IPv4 address", host)
	if len(parts) > 4 {
		return netip.Addr{}, false, bad
	}
	var v uint64
	for i, part := range parts {
		n, err := ipv4Number(part)
		if err != nil {
			return netip.Addr{}, false, bad
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false, bad
			}
			v |= n << (8 * (3 - i))
		} else {
			if n >= 1<<(8*(5-len(parts))) {
				return netip.Addr{}, false, bad
			}
			v |= n
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

// browserIDNA maps a host as a browser's URL parser does (UTS #46,
// nontransitional), without the checks of a name's form it leaves to DNS.
var browserIDNA = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.CheckHyphens(false), idna.StrictDomainName(false), idna.VerifyDNSLength(false))

// ipv4Number reads one part of an IPv4 host as the URL Standard does:
// 0x (or 0X) hexadecimal, a leading 0 octal, else decimal; "0x" alone is 0.
func ipv4Number(s string) (uint64, error) {
	base := 10
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, nil
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || strings.ContainsAny(s, "+-_") {
		return 0, fmt.Errorf("not a number")
	}
	return strconv.ParseUint(s, base, 64)
}

// Targets is a list of targets followed by those of a targets file ("":
// none), each checked.
func Targets(list []string, file string) ([]string, error) {
	out := slices.Clone(list)
	if file != "" {
		more, err := ReadTargets(file)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// TargetNotes are the comments after the targets of a targets file (what
// doxlab survey verified of each), by target; a plan keeps them.
// It reads the file as ReadTargets does (listfile), so that a note is
// kept under the target ReadTargets gives.
func TargetNotes(path string) (map[string]string, error) {
	notes := map[string]string{}
	err := listfile.EachNoted(path, func(_ int, target, note string) error {
		if note != "" {
			notes[target] = note
		}
		return nil
	})
	return notes, err
}

// ReadTargets reads one target per line; # starts a comment. A bad line
// is named by file and line.
func ReadTargets(path string) ([]string, error) { return readList(path, CheckTarget) }

// readList reads one entry a line, # starting a comment, each checked;
// a bad line is named by file and line.
func readList(path string, check func(string) error) ([]string, error) {
	var out []string
	err := listfile.Each(path, func(_ int, line string) error {
		if err := check(line); err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		out = append(out, line)
		return nil
	})
	return out, err
}

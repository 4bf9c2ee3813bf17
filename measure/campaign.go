package measure

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/miekg/dns"
	"gopkg.in/yaml.v3"

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
}

// MaxRounds is the most rounds a campaign is planned in.
const MaxRounds = 1000

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
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %s", path, oneLine(err))
	}
	var c Campaign
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %s", path, oneLine(err))
	}
	lines := fieldLines(&root)
	bad := func(field, format string, a ...any) error {
		if l, ok := lines[field]; ok {
			return fmt.Errorf("%s:%d: %s: %s", path, l, field, fmt.Sprintf(format, a...))
		}
		return fmt.Errorf("%s: %s: %s", path, field, fmt.Sprintf(format, a...)) // a field that is missing has no line
	}
	if err := CheckLabel(c.Name); err != nil {
		return nil, bad("name", "%v", err)
	}
	seen := map[string]bool{}
	for _, v := range c.Vantages {
		if err := CheckVantageName(v.Name); err != nil {
			return nil, bad("vantages", "%v", err)
		}
		for field, s := range map[string]string{"location": v.Location, "network": v.Network, "address": v.Address} {
			if err := CheckLabel(s); err != nil {
				return nil, bad("vantages", "%s: %s: %v", v.Name, field, err)
			}
		}
		if seen[v.Name] {
			return nil, bad("vantages", "%q named twice", v.Name)
		}
		seen[v.Name] = true
		for _, t := range v.Targets {
			if err := CheckTarget(t); err != nil {
				return nil, bad("vantages", "%s: %q: %v", v.Name, t, err)
			}
		}
		if v.ASN < 0 {
			return nil, bad("vantages", "%s: negative asn", v.Name)
		}
	}
	ownTargets := len(c.Vantages) > 0 && !slices.ContainsFunc(c.Vantages, func(v CampaignVantage) bool { return len(v.Targets) == 0 && v.TargetsFile == "" })
	if len(c.Targets) == 0 && c.TargetsFile == "" && !ownTargets {
		return nil, bad("targets", "no targets (give targets or targets_file)")
	}
	for _, t := range c.Targets {
		if err := CheckTarget(t); err != nil {
			return nil, bad("targets", "%q: %v", t, err)
		}
	}
	for _, t := range c.Transports {
		if _, ok := protocol.Lookup(t); !ok {
			return nil, bad("transports", "%v", unknownTransport(t))
		}
	}
	for _, cn := range c.Conditions {
		if _, ok := Conditions[cn]; !ok {
			return nil, bad("conditions", "unknown condition %q (want fresh, pam, resumed or 0rtt)", cn)
		}
	}
	if c.Query.Type != "" {
		if _, ok := dns.StringToType[strings.ToUpper(c.Query.Type)]; !ok {
			return nil, bad("query", "unknown record type %q", c.Query.Type)
		}
	}
	if c.Query.Name != "" {
		if _, ok := dns.IsDomainName(c.Query.Name); !ok {
			return nil, bad("query", "bad name %q", c.Query.Name)
		}
	}
	switch {
	case c.Repeat < 0:
		return nil, bad("repeat", "negative")
	case c.Retries < 0 || c.Retries > 10:
		return nil, bad("retries", "%d is not 0..10", c.Retries)
	case c.Concurrency < 0:
		return nil, bad("concurrency", "negative")
	case math.IsNaN(c.Rate) || c.Rate < 0 || c.Rate > MaxRate:
		return nil, bad("rate", "%v is not from 0 (no limit) to %g tasks a second", c.Rate, float64(MaxRate))
	case c.Timeout < 0:
		return nil, bad("timeout", "negative")
	case c.Rounds < 0 || c.Rounds > MaxRounds:
		return nil, bad("rounds", "%d is not 1..%d", c.Rounds, MaxRounds)
	case c.Every < 0:
		return nil, bad("every", "negative")
	case c.Rounds > 1 && c.Every == 0:
		return nil, bad("rounds", "%d rounds need every: the time between them (e.g. every: 48h)", c.Rounds)
	case c.Every > 0 && c.Rounds == 0:
		return nil, bad("every", "say how many rounds (rounds: N) the campaign is measured in")
	case c.Rounds > 1 && len(c.Vantages) == 0:
		return nil, bad("rounds", "rounds are planned for workers: name the vantages (campaign plan), or run one round here")
	}
	if c.TLS.CA != "" {
		if _, err := os.Stat(c.TLS.CA); err != nil {
			return nil, bad("tls", "ca: %v", err)
		}
	}
	return &c, nil
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
	if _, ok := dns.IsDomainName(t); !ok || strings.ContainsAny(t, " /:") || t == "" {
		return fmt.Errorf("not a host, IP address or server URL")
	}
	return nil
}

// fieldLines maps each top-level key of a YAML document to its line.
func fieldLines(root *yaml.Node) map[string]int {
	lines := map[string]int{}
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		m := root.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			lines[m.Content[i].Value] = m.Content[i].Line
		}
	}
	return lines
}

func oneLine(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
	return strings.TrimPrefix(strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " "), "yaml: ")
}

// Apply puts the question into s.
func (q CampaignQuery) Apply(s *Spec) {
	s.Name = q.Name
	if q.Type != "" {
		s.Type = dns.StringToType[strings.ToUpper(q.Type)] // checked by LoadCampaign
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
	return s, nil
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
func TargetNotes(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	notes := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		target, note, found := strings.Cut(line, "#")
		if target, note = strings.TrimSpace(target), strings.TrimSpace(note); found && target != "" && note != "" {
			notes[target] = note
		}
	}
	return notes, nil
}

// ReadTargets reads one target per line; # starts a comment. A bad line
// is named by file and line.
func ReadTargets(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for n, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if err := CheckTarget(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %q: %w", path, n+1, line, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// Package measure implements the response-time method of the PAM 2022
// DoQ paper: for each target and transport, a cache-warming query first,
// then the measured query on a fresh connection that reuses what the
// warm-up learned only as far as the condition allows, and an RTT probe on
// the same port and protocol, so handshake and resolve times can be read
// in round trips.
package measure

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/probe"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/transport"
)

// unknownTransport names the transports Spec.Transports takes.
func unknownTransport(name string) error {
	return fmt.Errorf("unknown transport %q (want %s)", name, protocol.OneOf(protocol.Names(nil)))
}

// URLFor is the URL of a transport on host at its default port (DoH at
// /dns-query). For doh1 and doh2 the HTTP version is an option, not part
// of the URL.
func URLFor(transportName, host string) (string, error) {
	tr, ok := protocol.Lookup(transportName)
	if !ok {
		return "", unknownTransport(transportName)
	}
	if tr.Relayed {
		return "", fmt.Errorf("%s goes through a proxy: give %s as a URL, %s://PROXY/dns-query?target=%s/dns-query", tr.Label, host, tr.Scheme, host)
	}
	return tr.URL(net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(tr.Port)), "/dns-query"), nil
}

// Condition says what the measured connection may reuse from the warm-up.
type Condition = transport.Condition

// Conditions are the named ones (transport.Conditions).
var Conditions = transport.Conditions

// Spec is one measurement run.
type Spec struct {
	Targets     []string      // hosts or IPs (ports are the transports' defaults), or full URLs
	Transports  []string      // names from Transports; default all but doh1
	Conditions  []string      // names from Conditions; default fresh, resumed, 0rtt
	Name        string        // query name; default test.com, as in the paper
	Type        uint16        // default A
	NoRD        bool          // clear the RD bit (the paper sets it)
	Repeat      int           // measurements per task; default 1
	Timeout     time.Duration // per exchange; default 5 s, as in the paper
	Concurrency int           // tasks at once; default 1
	Rate        float64       // at most this many tasks per second overall; 0: no limit
	Seed        uint64        // order of tasks; 0: random
	Options     transport.Options
	// Retries repeats a task whose measured exchange got no answer, up to
	// this many times; the sample keeps the last attempt and the count.
	Retries int
	// Pages, if given, make the tasks page loads (the IMC 2022 study's):
	// each page × target × transport × repetition, with no condition. A
	// page load is measured by the web experiment's loader, not by Run.
	Pages []string
	// Skip, if set, leaves out tasks already measured (a resumed run).
	Skip func(Task) bool `json:"-"`
	// Progress, if set, is told after each task how many are done of how many.
	Progress func(done, total int) `json:"-"`
}

// Task is one measurement: a target, a transport, a condition.
type Task struct {
	URL       string `json:"url"`
	Target    string `json:"target"`
	Transport string `json:"transport"`
	Condition string `json:"condition"`
	Rep       int    `json:"rep"`
	Round     int    `json:"round,omitempty"` // of a campaign in rounds, from 1; 0: not one
	// Page, for a page-load task, is the page's URL: Chromium loads it
	// with its DNS through a stub forwarding to URL. Condition is empty.
	Page string `json:"page,omitempty"`
}

// Sample is what one task measured. Every exchange is kept whole.
type Sample struct {
	Task
	Start    time.Time         `json:"start"`
	Warmup   *transport.Record `json:"warmup"`
	Measure  *transport.Record `json:"measure"`
	Probe    *ProbeResult      `json:"probe"`
	RTTs     *InRTTs           `json:"rtts,omitempty"` // the measured durations divided by the probe's RTT
	Status   transport.Status  `json:"status"`
	Attempts int               `json:"attempts"` // 1, or more when retried
	Error    string            `json:"error,omitempty"`
	// Vantage and Job say where a campaign's worker measured the sample
	// and how the job queue delivered it; nil outside a campaign.
	Vantage *Vantage `json:"vantage,omitempty"`
	Job     *JobInfo `json:"job,omitempty"`
}

// Vantage is the point a sample was measured from: the name the campaign
// gave it, with what is known of its place in the network.
type Vantage struct {
	Name     string `json:"name" yaml:"name"`
	Address  string `json:"address,omitempty" yaml:"address,omitempty"`   // the worker's address towards the target
	Network  string `json:"network,omitempty" yaml:"network,omitempty"`   // the operator or network's name
	ASN      int    `json:"asn,omitempty" yaml:"asn,omitempty"`           // its autonomous system
	Location string `json:"location,omitempty" yaml:"location,omitempty"` // "Frankfurt, DE", or coordinates
}

// JobInfo is how a job queue delivered a sample's task: the delivery
// that measured it (Attempt, 1 for the first) and every worker that took
// the task, the killed ones included.
type JobInfo struct {
	ID          int64    `json:"id"`
	Attempt     int      `json:"attempt"`
	Worker      string   `json:"worker"`
	AttemptedBy []string `json:"attempted_by"`
	Version     string   `json:"doxlab_version"`
}

// ProbeResult is the RTT probe of a task.
type ProbeResult struct {
	Kind     string   `json:"kind"`
	RTTMs    float64  `json:"rtt_ms"`
	Versions []uint32 `json:"versions,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// InRTTs expresses the measured exchange in round trips.
type InRTTs struct {
	Handshake float64 `json:"handshake"`
	Resolve   float64 `json:"resolve"` // query sent to answer read
	Total     float64 `json:"total"`
}

// MaxTasks is the most tasks a spec may make: ten times a round of the
// IMC 2022 study's campaign, and a few hundred megabytes of tasks.
const MaxTasks = 1_000_000

// MaxRate is the highest Rate a spec may ask for: a task every
// microsecond, far beyond what one machine measures.
const MaxRate = 1e6

// MaxConcurrency is the most tasks a run measures at once: a thousand
// exchanges in flight towards the resolvers measured is a load test,
// not a measurement, and a typo's million would open a million
// sockets at once.
const MaxConcurrency = 1000

// MinRate is the lowest Rate but 0 (no limit): a task a day. Below it
// the pacing ticker's interval is no duration (1e-12 wraps
// time.Duration, and NewTicker panics).
const MinRate = 1.0 / 86400

// rateProblem says what is wrong with a rate of tasks a second, "" when
// nothing: 0, or from MinRate to MaxRate (NaN is neither).
func rateProblem(r float64) string {
	if r == 0 || (r >= MinRate && r <= MaxRate) {
		return ""
	}
	return fmt.Sprintf("%v is not 0 (no limit) or a number of tasks a second from one a day (%.3g) to %g", r, MinRate, float64(MaxRate))
}

// Check rejects values no run can mean: a rate rateProblem refuses,
// negative counts or timeouts.
func (s *Spec) Check() error {
	switch p := rateProblem(s.Rate); {
	case p != "":
		return fmt.Errorf("rate %s", p)
	case s.Concurrency < 0 || s.Concurrency > MaxConcurrency:
		return fmt.Errorf("concurrency %d is not 0 (one) to %d", s.Concurrency, MaxConcurrency)
	case s.Repeat < 0:
		return fmt.Errorf("repeat %d is negative", s.Repeat)
	case s.Retries < 0:
		return fmt.Errorf("retries %d is negative", s.Retries)
	case s.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", s.Timeout)
	}
	return nil
}

// conditionApplies says whether a condition means something on a
// transport: 0-RTT only where doxlab's transports do it, nothing to
// resume on UDP and TCP.
func conditionApplies(c Condition, tn string) bool {
	if c.ZeroRTT && tn != protocol.DoQ && tn != protocol.DoH3 {
		return false
	}
	return c.Name == "fresh" || !(c.Tickets || c.Tokens || c.Version) || (tn != protocol.UDP && tn != protocol.TCP)
}

// Tasks expands a spec into its tasks, in a random (seeded) order. A
// task named twice (a target listed twice, or a host and its own URL) is
// measured once.
func (s *Spec) Tasks() ([]Task, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if len(s.Targets) == 0 {
		return nil, fmt.Errorf("no targets")
	}
	switch {
	case len(s.Transports) > 0:
	case len(s.Pages) > 0:
		s.Transports = slices.Clone(PageTransports)
	default:
		s.Transports = protocol.Default()
	}
	if len(s.Pages) > 0 && len(s.Conditions) > 0 {
		return nil, fmt.Errorf("page loads take no conditions: the stub keeps what its forwarding keeps")
	}
	if len(s.Conditions) == 0 && len(s.Pages) == 0 {
		s.Conditions = []string{"fresh", "resumed", "0rtt"}
	}
	if s.Repeat <= 0 {
		s.Repeat = 1
	}
	for _, c := range s.Conditions {
		if _, ok := Conditions[c]; !ok {
			return nil, fmt.Errorf("unknown condition %q (want fresh, pam, resumed or 0rtt)", c)
		}
	}
	for _, p := range s.Pages {
		if err := CheckPage(p); err != nil {
			return nil, fmt.Errorf("page %q: %w", p, err)
		}
	}
	// What a target and transport are measured with: a condition each,
	// or a page each.
	type variant struct{ cond, page string }
	var variants []variant
	for _, c := range s.Conditions {
		variants = append(variants, variant{cond: c})
	}
	for _, p := range s.Pages {
		variants = append(variants, variant{page: p})
	}
	// What is measured, once each (a target listed twice, or a host and
	// its own URL, is one), then each that many times.
	var each []Task
	type key struct{ url, transport, condition, page string }
	seen := map[key]bool{}
	relayedErr := map[string]error{} // a relayed transport asked of a name, which names no proxy
	for _, target := range s.Targets {
		for _, tn := range s.Transports {
			tr, ok := protocol.Lookup(tn)
			if !ok {
				return nil, unknownTransport(tn)
			}
			url := target
			if !strings.Contains(target, "://") {
				var err error
				if url, err = URLFor(tn, target); err != nil {
					if tr.Relayed { // measured on the URL targets that name a proxy, if any
						relayedErr[tn] = err
						continue
					}
					return nil, err
				}
			} else if ep, err := transport.ParseURL(target); err != nil {
				return nil, err
			} else if ep.Scheme != tr.Scheme {
				continue // a URL target measures its own transport only
			}
			for _, v := range variants {
				if v.cond != "" && !conditionApplies(Conditions[v.cond], tn) {
					continue
				}
				if k := (key{url, tn, v.cond, v.page}); !seen[k] {
					seen[k] = true
					each = append(each, Task{URL: url, Target: target, Transport: tn, Condition: v.cond, Page: v.page})
				}
			}
		}
	}
	for tn, err := range relayedErr {
		if !slices.ContainsFunc(each, func(t Task) bool { return t.Transport == tn }) {
			return nil, err // no target named its proxy
		}
	}
	// Tasks are held in memory, a few hundred octets each: a typo in
	// repeat is an error, not a machine out of memory.
	if n := len(each) * s.Repeat; n > MaxTasks || n/s.Repeat != len(each) {
		return nil, fmt.Errorf("repeat %d of %d cells (target × transport × condition or page) is more than the %d tasks one run holds: measure fewer, or in rounds", s.Repeat, len(each), MaxTasks)
	}
	tasks := make([]Task, 0, len(each)*s.Repeat)
	for _, t := range each {
		for rep := range s.Repeat {
			t.Rep = rep
			tasks = append(tasks, t)
		}
	}
	seed := s.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
	return tasks, nil
}

// Run measures every task of the spec and hands each sample to out as it
// is done (from one goroutine at a time).
func Run(ctx context.Context, s Spec, out func(*Sample)) error {
	if len(s.Pages) > 0 {
		return fmt.Errorf("page loads are measured by package campaign's page loader, not by measure.Run")
	}
	tasks, err := s.Tasks()
	if err != nil {
		return err
	}
	if s.Concurrency <= 0 {
		s.Concurrency = 1
	}
	var tick <-chan time.Time
	if s.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / s.Rate))
		defer t.Stop()
		tick = t.C
	}
	var todo []Task
	for _, task := range tasks {
		if s.Skip == nil || !s.Skip(task) {
			todo = append(todo, task)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := 0
	sem := make(chan struct{}, s.Concurrency)
	for _, task := range todo {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sample := s.Measure(ctx, task)
			if ctx.Err() != nil && !sample.Status.HasResponse() {
				// Interrupted with no answer: the interrupt may be why (a
				// QUIC connection closed under it fails otherwise than
				// "canceled"), so no sample, and a resume measures it.
				return
			}
			mu.Lock()
			out(sample)
			done++
			if s.Progress != nil {
				s.Progress(done, len(todo))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// Measure measures one task, trying again up to Retries times while the
// measured exchange gets no answer; the sample keeps the last attempt.
func (s *Spec) Measure(ctx context.Context, task Task) *Sample {
	sample, attempts := s.measure(ctx, task), 1
	for attempts <= s.Retries && !sample.Status.HasResponse() && ctx.Err() == nil {
		sample = s.measure(ctx, task)
		attempts++
	}
	sample.Attempts = attempts
	return sample
}

func (s *Spec) query() *dns.Msg {
	name, qtype := s.Name, s.Type
	if name == "" {
		name = "test.com"
	}
	if qtype == 0 {
		qtype = dns.TypeA
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.RecursionDesired = !s.NoRD
	return q
}

// measure runs one task: warm-up, measured exchange, probe.
func (s *Spec) measure(ctx context.Context, task Task) *Sample {
	sample := &Sample{Task: task, Start: time.Now().UTC()}
	c := Conditions[task.Condition]
	opts := s.Options
	tr, _ := protocol.Lookup(task.Transport)
	opts.HTTPVersion = tr.HTTP
	if opts.Timeout == 0 {
		opts.Timeout = s.Timeout
	}
	c.Apply(&opts)
	q := s.query()
	exchange := func() *transport.Record {
		t, err := transport.New(task.URL, opts)
		if err != nil {
			return &transport.Record{URL: task.URL, Status: transport.StatusBadRequest, Error: err.Error(), Answers: []string{}}
		}
		defer t.Close()
		rec, _ := t.Exchange(ctx, q)
		return rec
	}
	// The warm-up fills the resolver's cache and the session; its own
	// connection is closed before the measurement starts.
	sample.Warmup = exchange()
	sample.Warmup.Warmup = true
	sample.Measure = exchange()
	sample.Status, sample.Error = sample.Measure.Status, sample.Measure.Error
	sample.Probe = s.probe(ctx, task)
	if sample.Probe.RTTMs > 0 && sample.Measure.Status.HasResponse() {
		t, p := sample.Measure.Timing, sample.Probe.RTTMs
		sample.RTTs = &InRTTs{Handshake: round(t.HandshakeMs / p), Resolve: round(t.QueryMs / p), Total: round(t.TotalMs / p)}
	}
	return sample
}

func (s *Spec) probe(ctx context.Context, task Task) *ProbeResult {
	ep, err := transport.ParseURL(task.URL)
	if err != nil {
		return &ProbeResult{Error: err.Error()}
	}
	f := probe.ForScheme(ep.Scheme)
	timeout := s.Timeout
	if timeout == 0 {
		timeout = transport.DefaultTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := ep.Host
	if ip := net.ParseIP(host); ip == nil {
		if ips, err := net.DefaultResolver.LookupIP(pctx, "ip", host); err == nil && len(ips) > 0 {
			host = ips[0].String()
		}
	}
	var r probe.Result
	probeIt := func() error {
		r, err = f(pctx, net.JoinHostPort(host, strconv.Itoa(ep.Port)))
		return err
	}
	if open := s.Options.OpenSockets; open != nil {
		// The probe's socket is made where the transports' are (a testbed
		// host), so it measures the same path.
		err = open(probeIt)
	} else {
		err = probeIt()
	}
	if err != nil {
		return &ProbeResult{Kind: r.Kind, Error: err.Error()}
	}
	return &ProbeResult{Kind: r.Kind, RTTMs: r.RTTMs(), Versions: r.Versions}
}

func round(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

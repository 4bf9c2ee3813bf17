// Package hol is the hol experiment: the DoH-cost paper's head-of-line
// blocking (§3, Fig. 2), per transport and server behaviour.
package hol

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/experiment"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// HOL is the DoH-cost paper's head-of-line blocking experiment (§3,
// Fig. 2): per transport, one persistent connection carries queries for
// unique random names with Poisson arrivals, once as a baseline and once
// with the server delaying one answer in every DelayEvery. What separates
// the transports is the knock-on delay suffered by the queries that were
// not delayed themselves.
type HOL struct {
	Profiles   []string // default none (the paper ran on one machine)
	Transports []string // default Transports
	Queries    int      // per run; default 100
	Rate       float64  // mean arrivals per second; default 10
	DelayEvery int      // one delayed answer in this many; default 25
	Delay      time.Duration
	Base       string // the names' base domain; default hol.doxlab.test
	Seed       uint64 // 0: random
	experiment.Env
}

func init() {
	experiment.Register(experiment.Info{Name: "hol", Method: 1,
		Measures:   "head-of-line blocking: the knock-on delay of one held-back answer",
		Reproduces: "DoH-cost paper §3, Fig. 2",
		Resumable:  true, Quick: "40 queries at 20/s with one in 10 delayed, per run",
		Doc: "head-of-line blocking: Poisson queries over one connection per\ntransport, one answer in 25 delayed by 1 s, and the knock-on\ndelay the other queries suffer",
		New: func() experiment.Experiment { return new(HOL) }})
}

// Quick is a run of a few minutes.
func (c *HOL) Quick() {
	c.Queries, c.Rate, c.DelayEvery = 40, 20, 10
}

// Flags binds hol's flags.
// Its defaults are the config's (defaults), so they have one home.
func (c *HOL) Flags(fs *flag.FlagSet) {
	c.defaults() // a zero config is valid
	experiment.ListVar(fs, &c.Profiles, "profiles", c.Profiles, "access profiles (none: no emulated delay, as the paper)")
	experiment.ListVar(fs, &c.Transports, "transports", c.Transports, "transports; -inorder: the TCP or DoT server answers in query order")
	experiment.CountVar(fs, &c.Queries, "queries", "`N` queries per run")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "mean Poisson arrivals per second")
	experiment.CountVar(fs, &c.DelayEvery, "delay-every", "the server delays one answer in `N`")
	fs.DurationVar(&c.Delay, "delay", c.Delay, "by this much")
	fs.Uint64Var(&c.Seed, "seed", 0, "names and arrival times (0: random)")
}

// Transports are the transports and server behaviours measured: the
// TCP and DoT servers answer as soon as each answer is ready (RFC 7766
// §7) unless "-inorder", where they answer strictly in query order as many
// resolvers do. DoH/1.1 is pipelined; its server answers in order, as
// HTTP/1.1 must.
var Transports = protocol.WithVariants()

// KindQuery is a Query in the store.
var KindQuery = store.NewKind("hol-query")

// Query is one query of a HOL run, as stored.
type Query struct {
	Profile   string `json:"profile"`
	Transport string `json:"transport"`
	Run       string `json:"run"` // baseline or delayed
	Index     int    `json:"index"`
	Name      string `json:"name"`
	Delayed   bool   `json:"delayed"` // the server delayed this query's own answer
	// SendMs is the scheduled send time from the start of the run, SentMs
	// when the query was handed to the socket, AnswerMs when the answer
	// was read; ResolveMs is the exchange from the call until the answer
	// was parsed.
	SendMs    float64 `json:"send_ms"`
	SentMs    float64 `json:"sent_ms"`
	AnswerMs  float64 `json:"answer_ms"`
	ResolveMs float64 `json:"resolve_ms"`
	Status    string  `json:"status"`
	Error     string  `json:"error,omitempty"`
	Reused    bool    `json:"reused"`
}

// The arrival rates a run may ask for: a query every 10 s to one every
// 10 µs.
const minRate, maxRate = 0.1, 1e5

func (c *HOL) defaults() error {
	if len(c.Profiles) == 0 {
		c.Profiles = []string{"none"}
	}
	if len(c.Transports) == 0 {
		c.Transports = Transports
	}
	for _, t := range c.Transports {
		if !slices.Contains(Transports, t) {
			return fmt.Errorf("unknown transport %q (want %s)", t, strings.Join(Transports, ", "))
		}
	}
	if c.Queries <= 0 {
		c.Queries = 100
	}
	if c.Rate == 0 {
		c.Rate = 10
	}
	// NaN and Inf too, and a rate so low a gap is no duration: the
	// arrivals' gaps would wrap time.Duration and every query go at once.
	if !(c.Rate >= minRate && c.Rate <= maxRate) {
		return fmt.Errorf("--rate %v: want queries a second from %g to %g", c.Rate, minRate, maxRate)
	}
	if c.DelayEvery <= 0 {
		c.DelayEvery = 25
	}
	if c.Delay <= 0 {
		c.Delay = time.Second
	}
	if c.Base == "" {
		c.Base = "hol.doxlab.test"
	}
	c.Env.Defaults()
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return nil
}

// holPlan is every name of the experiment, drawn up front: the server
// must know which names to delay.
type holPlan struct {
	names   map[string][]string // per profile|transport|run
	delayed map[string]bool
	gaps    map[string][]time.Duration
}

func (c *HOL) plan(rng *rand.Rand) *holPlan {
	p := &holPlan{names: map[string][]string{}, delayed: map[string]bool{}, gaps: map[string][]time.Duration{}}
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	used := map[string]bool{}
	for _, prof := range c.Profiles {
		for _, t := range c.Transports {
			for _, run := range []string{"baseline", "delayed"} {
				k := prof + "|" + t + "|" + run
				for i := range c.Queries {
					var name string
					for name == "" || used[name] {
						b := make([]byte, 5)
						for j := range b {
							b[j] = letters[rng.IntN(len(letters))]
						}
						name = string(b) + "." + c.Base + "."
					}
					used[name] = true
					p.names[k] = append(p.names[k], name)
					if run == "delayed" && (i+1)%c.DelayEvery == 0 {
						p.delayed[name] = true
					}
					p.gaps[k] = append(p.gaps[k], time.Duration(rng.ExpFloat64()/c.Rate*float64(time.Second)))
				}
			}
		}
	}
	return p
}

// Run runs the experiment and returns its ID.
func (c *HOL) Run(ctx context.Context) (string, error) {
	if err := c.defaults(); err != nil {
		return "", experiment.BadDesign(err)
	}
	profiles, err := testbed.LookupProfiles(c.Profiles)
	if err != nil {
		return "", experiment.BadDesign(err)
	}
	plan := c.plan(rand.New(rand.NewPCG(c.Seed, 1)))
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "hol"})
	if err != nil {
		return "", err
	}
	defer closeAll()
	ip := tb.IP("server")
	delays := map[string]time.Duration{}
	for n := range plan.delayed {
		delays[n] = c.Delay
	}
	answers := server.Answers{Any: "192.0.2.1"}
	faults := server.Faults{DelayNames: delays}
	inOrder := faults
	inOrder.InOrder = true
	cfgs := []*server.Config{
		{Listen: server.Listen{UDP: ip + ":53", TCP: ip + ":53", DoT: ip + ":853", DoH: ip + ":443", DoH3: ip + ":443", DoQ: ip + ":853"}, Answers: answers, Faults: faults},
		{Listen: server.Listen{TCP: ip + ":5353", DoT: ip + ":8853"}, Answers: answers, Faults: inOrder},
	}
	for _, cfg := range cfgs {
		srv, err := experiment.StartServer(tb, cfg)
		if err != nil {
			return "", err
		}
		defer srv.Close()
	}
	expID, err := c.ExperimentID("hol")
	if err != nil {
		return "", err
	}
	spec := map[string]any{"transports": c.Transports, "queries": c.Queries, "rate": c.Rate, "delay_every": c.DelayEvery, "delay": c.Delay.String(), "base": c.Base, "seed": c.Seed}
	c.Plan(2 * len(c.Transports) * len(profiles)) // a baseline and a delayed run of each
	return expID, c.EachProfile(ctx, st, tb, expID, "experiment:hol", profiles, spec, func(p testbed.Profile, runID string) error {
		stored, err := experiment.LoadResults[Query](ctx, st, KindQuery, experiment.OfRun(runID))
		if err != nil {
			return err
		}
		done := map[string]bool{}
		for _, q := range stored {
			done[q.Transport+"|"+q.Run] = true
		}
		for _, t := range c.Transports {
			for _, run := range []string{"baseline", "delayed"} {
				if done[t+"|"+run] {
					c.Advance(1)
					continue
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				k := p.Name + "|" + t + "|" + run
				qs, err := c.runOne(ctx, tb, ip, t, plan.names[k], plan.gaps[k], plan.delayed)
				if err != nil {
					return fmt.Errorf("%s %s %s: %w", p.Name, t, run, err)
				}
				for _, q := range qs {
					q.Profile, q.Run = p.Name, run
					if err := st.WriteResult(ctx, runID, KindQuery, fmt.Sprintf("%s|%s|%03d", t, run, q.Index), time.Now(), q); err != nil {
						return err
					}
				}
				fmt.Fprintf(c.Log, "hol: %s %s %s: %d queries\n", p.Name, t, run, len(qs))
				c.Advance(1)
			}
		}
		return nil
	})
}

// holURL is the server URL of a HOL transport.
func holURL(t, ip string) (url string, opts transport.Options) {
	opts = transport.Options{Reuse: true, Insecure: true, Timeout: 10 * time.Second}
	switch t {
	case "tcp-inorder":
		return "tcp://" + ip + ":5353", opts
	case "dot-inorder":
		return "tls://" + ip + ":8853", opts
	case "doh1":
		opts.HTTPVersion = "1.1"
	case "doh2":
		opts.HTTPVersion = "2"
	}
	u, _ := measure.URLFor(t, ip)
	return u, opts
}

// runOne sends the names over one persistent connection, opened by a
// first query inside the client host before the clock starts.
func (c *HOL) runOne(ctx context.Context, tb experiment.Net, ip, t string, names []string, gaps []time.Duration, delayed map[string]bool) ([]*Query, error) {
	url, opts := holURL(t, ip)
	opts.OpenSockets = func(open func() error) error { return tb.Run("client", open) }
	tr, err := transport.New(url, opts)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	warm := new(dns.Msg)
	warm.SetQuestion("warm-up."+c.Base+".", dns.TypeA)
	if _, err := tr.Exchange(ctx, warm); err != nil {
		return nil, fmt.Errorf("opening the connection: %w", err)
	}
	out := make([]*Query, len(names))
	start := time.Now()
	var wg sync.WaitGroup
	at := time.Duration(0)
	for i, name := range names {
		at += gaps[i]
		q := &Query{Transport: t, Index: i, Name: name, Delayed: delayed[name], SendMs: msOf(at)}
		out[i] = q
		if d := time.Until(start.Add(at)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			called := time.Now()
			rec, _ := tr.Exchange(ctx, m)
			q.Status, q.Error, q.Reused = string(rec.Status), rec.Error, rec.Conn.Reused
			q.SentMs = msOf(called.Sub(start)) + rec.Timing.QueryStartMs
			q.ResolveMs = rec.Timing.TotalMs
			q.AnswerMs = q.SentMs + rec.Timing.QueryMs
		}()
	}
	wg.Wait()
	return out, nil
}

func msOf(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// Summary is one transport's result on one profile.
type Summary struct {
	Profile, Transport string
	BaselineMedian     float64       // ms, of the baseline run
	Baseline           stats.Summary // the baseline run's resolution times, ms
	DelayedOwn         int           // queries the server delayed
	KnockOn            int           // other queries slowed by more than KnockOnThreshold
	KnockOnSumMs       float64       // their delay beyond the baseline median, summed
	KnockOnMaxMs       float64
	Failed             int
}

// KnockOnThreshold is how much slower than the baseline's median a query
// must be to count as held up: a tenth of the injected second, far above
// the jitter of a loaded machine.
const KnockOnThreshold = 100.0

// Summarize computes the knock-on delay per profile and transport.
func Summarize(qs []*Query) []Summary {
	type key struct{ p, t string }
	base := map[key][]float64{}
	for _, q := range qs {
		if q.Run == "baseline" && q.Status == "ok" {
			k := key{q.Profile, q.Transport}
			base[k] = append(base[k], q.ResolveMs)
		}
	}
	sums := map[key]*Summary{}
	var keys []key
	for _, q := range qs {
		if q.Run != "delayed" {
			continue
		}
		k := key{q.Profile, q.Transport}
		s, ok := sums[k]
		if !ok {
			b := stats.Summarize(base[k])
			s = &Summary{Profile: q.Profile, Transport: q.Transport, BaselineMedian: b.Median, Baseline: b}
			sums[k] = s
			keys = append(keys, k)
		}
		switch {
		case q.Status != "ok":
			s.Failed++
		case q.Delayed:
			s.DelayedOwn++
		default:
			if ex := q.ResolveMs - s.BaselineMedian; ex > KnockOnThreshold {
				s.KnockOn++
				s.KnockOnSumMs += ex
				s.KnockOnMaxMs = max(s.KnockOnMaxMs, ex)
			}
		}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.p, b.p), order.Compare(a.t, b.t))
	})
	out := make([]Summary, len(keys))
	for i, k := range keys {
		out[i] = *sums[k]
	}
	return out
}

// Package serverload is the server-load experiment: doxlab serve under
// open-loop load on every transport (doxlab bench's stepped mode), the
// highest rate it holds within a latency bound, and the latency over time
// and percentile spectrum at each rate.
package serverload

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// ServerLoad steps an open-loop query rate up, doubling from Start to
// Limit, against one doxlab server on loopback per transport, until the
// server (or the client: both share this machine's cores, and the
// record says how many) no longer holds the bound. Every query is stored
// with its intended send time, so the report draws latency over time and
// the percentile spectrum from the samples themselves.
type ServerLoad struct {
	Transports   []string      // udp, tcp, dot, doh1, doh2, doh3, doq; default all but doh1
	Start, Limit float64       // queries per second: the first step and the most tried; default 1000 and 64000
	Step         time.Duration // each rate's duration; default 5 s
	P99          time.Duration // the bound: p99 latency from the intended send time; default 20 ms
	MaxLoss      float64       // the bound: share of the queries due unanswered or never sent; default 0.001
	Conns        int           // connections per transport (reused); default 4
	experiment.Env
}

// Transports is every transport the experiment can load: all of them.
var Transports = protocol.Direct()

func init() {
	experiment.Register(experiment.Info{Name: "server-load", Method: 1,
		Measures:   "doxlab serve under open-loop load on every transport: the rate held, latency over time, percentile spectrum",
		Reproduces: "none (beyond the papers)",
		Quick:      "1000 to 4000 queries/s, 1 s a step",
		Doc:        "doxlab serve under open-loop load on every transport: the\nhighest rate held within a p99 bound, latency over time and\nthe percentile spectrum (doxlab bench's stepped mode, on loopback)",
		New:        func() experiment.Experiment { return new(ServerLoad) }})
}

// Quick is a run of well under a minute.
func (c *ServerLoad) Quick() { c.Start, c.Limit, c.Step = 1000, 4000, time.Second }

// Flags binds server-load's flags. Its defaults are the config's.
func (c *ServerLoad) Flags(fs *flag.FlagSet) {
	c.defaults()
	experiment.ListVar(fs, &c.Transports, "transports", c.Transports, "transports to load: udp, tcp, dot, doh1, doh2, doh3, doq")
	fs.Float64Var(&c.Start, "start", c.Start, "the first rate, queries/s")
	fs.Float64Var(&c.Limit, "limit", c.Limit, "the highest rate tried, queries/s (rates double from --start)")
	fs.DurationVar(&c.Step, "step", c.Step, "how long each rate runs")
	fs.DurationVar(&c.P99, "p99", c.P99, "a rate is held while its p99 latency, from the intended send time, is at most this")
	fs.Float64Var(&c.MaxLoss, "max-loss", c.MaxLoss, "and while it loses at most this share of the queries due (unanswered, or never sent)")
	experiment.CountVar(fs, &c.Conns, "conns", "`N` connections per transport, reused")
}

func (c *ServerLoad) defaults() {
	if len(c.Transports) == 0 {
		c.Transports = slices.DeleteFunc(slices.Clone(Transports), func(t string) bool { return t == "doh1" })
	}
	if c.Start <= 0 {
		c.Start = 1000
	}
	if c.Limit <= 0 {
		c.Limit = 64000
	}
	if c.Step <= 0 {
		c.Step = 5 * time.Second
	}
	if c.P99 <= 0 {
		c.P99 = 20 * time.Millisecond
	}
	if c.MaxLoss <= 0 {
		c.MaxLoss = 0.001
	}
	if c.Conns <= 0 {
		c.Conns = 4
	}
	c.Env.Defaults()
}

// maxRates bounds the rates one run steps through, each for --step:
// 24 doublings are a factor of 16 million.
const maxRates = 24

// rates are the rates the run steps through, from --start doubling up
// to --limit. What defaults leaves is checked here: NaN passes "<= 0",
// and an infinite limit would double without end.
func (c *ServerLoad) rates() ([]float64, error) {
	for _, x := range []struct {
		flag string
		v    float64
	}{{"--start", c.Start}, {"--limit", c.Limit}} {
		if math.IsNaN(x.v) || math.IsInf(x.v, 0) {
			return nil, fmt.Errorf("%s %v is not a rate of queries a second", x.flag, x.v)
		}
	}
	if !(c.MaxLoss < 1) {
		return nil, fmt.Errorf("--max-loss %v: want a share of the queries, below 1", c.MaxLoss)
	}
	if c.Limit < c.Start {
		return nil, fmt.Errorf("--limit %.0f is below --start %.0f", c.Limit, c.Start)
	}
	rates := bench.Doubling(c.Start, c.Limit)
	if len(rates) > maxRates {
		return nil, fmt.Errorf("--start %g doubles %d times up to --limit %g, more than %d rates of --step %v each", c.Start, len(rates)-1, c.Limit, maxRates, c.Step)
	}
	return rates, nil
}

// urls are the server's URL per transport.
func urls(srv *server.Server) map[string]string {
	out := map[string]string{}
	for _, p := range protocol.All {
		out[p.Name] = srv.URL(p)
	}
	return out
}

// Run runs the experiment and returns its ID.
func (c *ServerLoad) Run(ctx context.Context) (string, error) {
	c.defaults()
	for _, t := range c.Transports {
		if !slices.Contains(Transports, t) {
			return "", fmt.Errorf("transport %q is not one of %v", t, Transports)
		}
	}
	rates, err := c.rates()
	if err != nil {
		return "", err
	}
	st, err := store.Open(ctx, c.Store)
	if err != nil {
		return "", err
	}
	defer st.Close()
	// Loopback, not the testbed: the emulator's own rate would bound the
	// load long before the server does.
	lo := "127.0.0.1:0"
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: lo, TCP: lo, DoT: lo, DoH: lo, DoH3: lo, DoQ: lo},
		Answers: server.Answers{Any: "192.0.2.1"}})
	if err != nil {
		return "", err
	}
	if err := srv.Start(); err != nil {
		return "", err
	}
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	expID, err := c.ExperimentID("server-load")
	if err != nil {
		return "", err
	}
	runID := expID + "-loopback"
	bound := bench.Bound{P99: c.P99, MaxLoss: c.MaxLoss}
	if err := c.BeginRun(ctx, st, runID, "experiment:server-load", "", map[string]any{"experiment": expID, "transports": c.Transports,
		"rates": rates, "step": c.Step.String(), "bound": bound, "conns": c.Conns, "server": "doxlab serve, in process, static answers",
		"cpus": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0), "pinning": "client and server share this process and its cores, unpinned"}); err != nil {
		return "", err
	}
	u := urls(srv)
	c.Plan(len(c.Transports) * len(rates)) // a transport's steps past the first not held are skipped
	for _, t := range c.Transports {
		opts := transport.Options{Reuse: true, RootCAs: roots, Timeout: 2 * time.Second}
		if t == "doh1" {
			opts.HTTPVersion = "1.1"
		}
		cfg := bench.Config{URL: u[t], Duration: c.Step, Conns: c.Conns, Options: opts, Keep: true, StepDone: func(bench.Step) { c.Advance(1) }}
		fmt.Fprintf(c.Log, "%s: %v queries/s, %s each\n", t, rates, c.Step)
		steps, held, err := bench.Steps(ctx, cfg, rates, bound)
		for i, s := range steps {
			rec := bench.NewRecord(fmt.Sprintf("%s.%d", t, i), cfg, s.Result, i)
			rec.Label, rec.Bound, rec.Held = t, &bound, s.Held
			if err := bench.Save(ctx, st, runID, rec, s.Result.Samples); err != nil {
				return expID, err
			}
		}
		if err != nil {
			return expID, fmt.Errorf("%s: %w", t, err)
		}
		c.Advance(len(rates) - len(steps))
		fmt.Fprintf(c.Log, "%s: held %.0f queries/s\n", t, held)
	}
	return expID, nil
}

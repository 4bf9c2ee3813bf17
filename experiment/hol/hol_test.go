package hol

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doxlab/doxlab/experiment"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

func TestSummarizeHOL(t *testing.T) {
	q := func(tr, run string, delayed bool, ms float64) *Query {
		return &Query{Profile: "none", Transport: tr, Run: run, Delayed: delayed, ResolveMs: ms, Status: "ok"}
	}
	qs := []*Query{
		q("dot-inorder", "baseline", false, 1), q("dot-inorder", "baseline", false, 2), q("dot-inorder", "baseline", false, 3),
		q("dot-inorder", "delayed", true, 1001), q("dot-inorder", "delayed", false, 902), q("dot-inorder", "delayed", false, 52),
		q("udp", "baseline", false, 1), q("udp", "delayed", true, 1001), q("udp", "delayed", false, 1),
		{Profile: "none", Transport: "udp", Run: "delayed", Status: "timeout"},
	}
	s := Summarize(qs)
	require.Len(t, s, 2)
	require.Equal(t, "udp", s[0].Transport, "in Transports order")
	require.Zero(t, s[0].KnockOn)
	require.Equal(t, 1, s[0].Failed)
	require.Equal(t, 2.0, s[1].BaselineMedian)
	require.Equal(t, 1, s[1].DelayedOwn)
	require.Equal(t, 1, s[1].KnockOn, "52 ms is within the threshold, 902 ms is not")
	require.Equal(t, 900.0, s[1].KnockOnSumMs)
}

// TestHOLBlocksOnlyInOrder runs a short HOL experiment in the testbed:
// queries are held behind a delayed answer for an in-order DoT server and
// pipelined DoH/1.1, and never where a transport cannot block. A busy
// machine can slow any query past the knock-on threshold, so "cannot
// block" is checked by what blocking is (heldBehind), not by time alone.
func TestHOLBlocksOnlyInOrder(t *testing.T) {
	testutil.Timed(t)
	testutil.NeedRoot(t, "the testbed needs root")
	db := filepath.Join(t.TempDir(), "hol.db")
	c := &HOL{Transports: []string{"udp", "dot", "dot-inorder", "doh1", "doh2", "doq"}, Queries: 30, Rate: 20, DelayEvery: 10, Delay: 500 * time.Millisecond, Env: experiment.Env{Store: db}, Seed: 7}
	res, err := experiment.RunAndLoad(context.Background(), c)
	require.NoError(t, err)
	qs := res.(Queries)
	require.Len(t, qs, 6*2*30)
	blocks := map[string]bool{"dot-inorder": true, "doh1": true}
	for _, s := range Summarize(qs) {
		require.Zero(t, s.Failed, s.Transport)
		require.Equal(t, 3, s.DelayedOwn, s.Transport)
		if blocks[s.Transport] {
			require.Positive(t, s.KnockOn, "%s holds answers back behind the delayed one", s.Transport)
		} else if s.KnockOn > 0 {
			t.Logf("%s: %d queries over the knock-on threshold (a busy machine)", s.Transport, s.KnockOn)
		}
	}
	held := heldBehind(qs)
	for _, tr := range c.Transports {
		if blocks[tr] {
			require.Positive(t, held[tr], "%s: queries released with a delayed answer", tr)
		} else {
			require.Zero(t, held[tr], "%s cannot block", tr)
		}
	}
	for _, q := range qs {
		require.True(t, q.Reused, "%s %s %d: one persistent connection", q.Transport, q.Run, q.Index)
	}
}

// heldBehind counts, per transport, the queries of the delayed run held
// behind a delayed answer: sent while it was held, more than 100 ms
// before its release, and answered within 50 ms of it. A query slowed by
// a busy machine would have to stall for hundreds of milliseconds and
// end at that instant to count.
func heldBehind(qs Queries) map[string]int {
	held := map[string]int{}
	for _, d := range qs {
		if d.Run != "delayed" || !d.Delayed {
			continue
		}
		for _, q := range qs {
			if q.Run == "delayed" && q.Transport == d.Transport && q.Profile == d.Profile && !q.Delayed &&
				q.SentMs > d.SentMs && q.SentMs < d.AnswerMs-100 && math.Abs(q.AnswerMs-d.AnswerMs) < 50 {
				held[q.Transport]++
			}
		}
	}
	return held
}

// run is a transport's two runs on profile none: a baseline of three
// queries near 2 ms, and a delayed run with one held answer and, when
// knock, one query slowed past the threshold behind it.
func run(tr string, knock bool) []*Query {
	q := func(run string, delayed bool, ms float64) *Query {
		return &Query{Profile: "none", Transport: tr, Run: run, Delayed: delayed, ResolveMs: ms, Status: "ok"}
	}
	slowed := 3.0
	if knock {
		slowed = 950
	}
	return []*Query{q("baseline", false, 1), q("baseline", false, 2), q("baseline", false, 3),
		q("delayed", true, 1002), q("delayed", false, slowed), q("delayed", false, 2)}
}

// TestHOLFinding: the claim holds when every in-order transport measured
// shows knock-on and none whose queries travel apart does; plain TCP and
// DoT, neither, do not count; without both kinds there is no verdict.
func TestHOLFinding(t *testing.T) {
	finding := func(runs ...[]*Query) experiment.Finding {
		fs := Queries(slices.Concat(runs...)).Findings()
		require.Len(t, fs, 1)
		return fs[0]
	}
	f := finding(run("udp", false), run("doh2", false), run("doq", false), run("dot-inorder", true), run("doh1", true), run("dot", true))
	require.Equal(t, experiment.Holds, f.Verdict, f.Here)
	require.Equal(t, "queries slowed by another's delay: dot-inorder 1, doh1 1; udp 0, doh2 0, doq 0", f.Here)
	require.Equal(t, 3, f.N, "the delayed run's answered queries")

	f = finding(run("udp", false), run("dot-inorder", false), run("doh1", true))
	require.Equal(t, experiment.Differs, f.Verdict, "an in-order transport without knock-on")
	f = finding(run("doh3", true), run("dot-inorder", true))
	require.Equal(t, experiment.Differs, f.Verdict, "a stream per query held up")

	f = finding(run("udp", false), run("tcp", true))
	require.Equal(t, experiment.NoData, f.Verdict)
	require.Equal(t, "queries slowed by another's delay: none measured; udp 0", f.Here)

	// A failed query is not answered: the fewest answered is the claim's n.
	qs := slices.Concat(run("udp", false), run("dot-inorder", true))
	qs[5].Status = "timeout"
	require.Equal(t, 2, finding(qs).N)
}

// TestPlanDrawsEveryNameOnce: the plan is the seed's (the server must
// know the delayed names before the run); every name is new, under the
// base domain; one in DelayEvery of each delayed run is delayed, none of
// a baseline; gaps are drawn per query.
func TestPlanDrawsEveryNameOnce(t *testing.T) {
	c := &HOL{Profiles: []string{"none", "fiber"}, Transports: []string{"udp", "dot-inorder"}, Queries: 20, DelayEvery: 5, Seed: 7}
	require.NoError(t, c.defaults())
	p := c.plan(rand.New(rand.NewPCG(c.Seed, 0)))
	again := c.plan(rand.New(rand.NewPCG(c.Seed, 0)))
	require.Equal(t, p, again, "a seed draws the same plan")
	seen := map[string]bool{}
	for _, prof := range c.Profiles {
		for _, tr := range c.Transports {
			for _, r := range []string{"baseline", "delayed"} {
				k := prof + "|" + tr + "|" + r
				require.Len(t, p.names[k], 20, k)
				require.Len(t, p.gaps[k], 20, k)
				delayed := 0
				for i, name := range p.names[k] {
					require.False(t, seen[name], "%s drawn twice", name)
					seen[name] = true
					require.True(t, strings.HasSuffix(name, ".hol.doxlab.test."), name)
					if p.delayed[name] {
						delayed++
						require.Equal(t, 4, i%5, "%s: every fifth", k)
					}
				}
				require.Equal(t, map[string]int{"baseline": 0, "delayed": 4}[r], delayed, k)
			}
		}
	}
	require.Error(t, (&HOL{Transports: []string{"udp", "carrier-pigeon"}}).defaults())
	// A rate whose gaps are no duration: every query would go at once.
	for _, r := range []float64{math.NaN(), math.Inf(1), 1e-12, -5} {
		require.ErrorContains(t, (&HOL{Rate: r}).defaults(), "--rate", "%v", r)
	}
	slow := &HOL{Rate: 0.1, Queries: 20, Seed: 7}
	require.NoError(t, slow.defaults())
	gaps := slow.plan(rand.New(rand.NewPCG(7, 0))).gaps
	require.NotEmpty(t, gaps)
	for _, g := range gaps {
		for _, d := range g {
			require.GreaterOrEqual(t, d, time.Duration(0), "the lowest rate's gaps are durations")
		}
	}
}

// TestCellsAreTheBaselines: the report's cells are each profile and
// transport's baseline median, over the baseline run's answered queries
// only; the text table gives the same median with its n, and a
// transport with no baseline says so rather than a zero.
func TestCellsAreTheBaselines(t *testing.T) {
	q := func(tr, run, status string, ms float64) *Query {
		return &Query{Profile: "fiber", Transport: tr, Run: run, ResolveMs: ms, Status: status}
	}
	qs := Queries{q("doq", "baseline", "ok", 10), q("doq", "baseline", "ok", 12), q("doq", "baseline", "timeout", 900),
		q("doq", "delayed", "ok", 11), q("udp", "delayed", "ok", 3)}
	cells := qs.Cells()
	require.Len(t, cells, 2)
	require.Equal(t, map[string]string{"profile": "fiber", "transport": "udp"}, cells[0].Keys)
	require.Zero(t, cells[0].N, "no baseline run for udp")
	require.Equal(t, "baseline_ms", cells[1].Metric)
	require.Equal(t, 2, cells[1].N, "the timeout is no baseline")
	require.Equal(t, 11.0, *cells[1].Median)
	var b strings.Builder
	require.NoError(t, qs.WriteTable(&b))
	require.Contains(t, b.String(), "(2)")
	require.Regexp(t, `fiber\s+udp\s+–`, b.String(), "no baseline, no number")
	require.Equal(t, "none measured", orNone(""))
}

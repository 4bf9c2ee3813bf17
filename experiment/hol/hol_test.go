package hol

import (
	"context"
	"math"
	"path/filepath"
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

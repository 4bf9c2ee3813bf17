package pageload_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/pageload"
)

// TestGraphCheck: a graph without resources, with a scheme the loader
// cannot fetch, a parent that comes later, a discovery point past the
// parent's body or a negative gap is refused.
func TestGraphCheck(t *testing.T) {
	for _, g := range []*pageload.Graph{
		{Page: "x"},
		{Page: "x", Resources: []pageload.Resource{{URL: "ftp://x/", Parent: -1}}},
		{Page: "x", Resources: []pageload.Resource{{URL: "https://x/", Parent: -1}, {URL: "https://x/a", Parent: 1}}},
		{Page: "x", Resources: []pageload.Resource{{URL: "https://x/", Parent: -1, Size: 10}, {URL: "https://x/a", Parent: 0, AfterBytes: 11}}},
		{Page: "x", Resources: []pageload.Resource{{URL: "https://x/", Parent: -1}, {URL: "https://x/a", Parent: 0, GapMs: -1}}},
	} {
		require.Error(t, g.Check())
	}
	// A gap is the browser's time, replayed as a wait: one no load can
	// hold (a graph file's 1e300, or the document's lookup leading by
	// -1e308) overflowed the wait, and the load ran every resource at
	// once with times beyond any clock; NaN and infinity the same.
	doc := func(gap float64) pageload.Resource {
		return pageload.Resource{URL: "https://x/", Parent: -1, GapMs: gap, Size: 10}
	}
	for _, g := range []*pageload.Graph{
		{Page: "x", Resources: []pageload.Resource{doc(-1e308)}},
		{Page: "x", Resources: []pageload.Resource{doc(math.NaN())}},
		{Page: "x", Resources: []pageload.Resource{doc(0), {URL: "https://x/a", Parent: 0, GapMs: 1e300}}},
		{Page: "x", Resources: []pageload.Resource{doc(0), {URL: "https://x/a", Parent: 0, GapMs: math.Inf(1)}}},
		{Page: "x", Resources: []pageload.Resource{doc(0), {URL: "https://x/a", Parent: 0, GapMs: math.NaN()}}},
		{Page: "x", Resources: []pageload.Resource{doc(0)}, OnloadGapMs: 1e300},
		{Page: "x", Resources: []pageload.Resource{doc(0)}, OnloadGapMs: math.NaN()},
		{Page: "x", Resources: []pageload.Resource{doc(pageload.MaxGapMs + 1)}},
	} {
		require.ErrorContains(t, g.Check(), "gap", "%+v", g)
	}
	ok := &pageload.Graph{Page: "x", Resources: []pageload.Resource{doc(-pageload.MaxGapMs), {URL: "https://x/a", Parent: 0, GapMs: pageload.MaxGapMs}}, OnloadGapMs: pageload.MaxGapMs}
	require.NoError(t, ok.Check(), "the longest gaps a load can hold")
}

// TestMedianGraph chooses among loads of different network conditions by
// the browser's own time, not by PLT: the slow network's load had the
// median PLT, the fast one's the median browser time.
func TestMedianGraph(t *testing.T) {
	graph := func(plt, gap, onload float64) *pageload.Graph {
		return &pageload.Graph{Page: "https://p.test/", PLTMs: plt, OnloadGapMs: onload, Resources: []pageload.Resource{
			{URL: "https://p.test/", Parent: -1, GapMs: -1},
			{URL: "https://p.test/a.js", Parent: 0, GapMs: gap},
			{URL: "https://p.test/b.png", Parent: 1, GapMs: 2},
			{URL: "https://p.test/c.png", Parent: 0, GapMs: 1},
		}}
	}
	fast := graph(100, 10, 5)  // browser: -1+10+2+5 = 16 ms
	slow := graph(150, 30, 10) // 41 ms
	dns := graph(120, 2, 4)    // a slower lookup, the browser quick: 7 ms
	require.InDelta(t, 16, fast.BrowserMs(), 1e-9)
	m := pageload.MedianGraph([]*pageload.Graph{slow, dns, fast})
	require.Equal(t, 100.0, m.PLTMs, "the median browser time's load")
	require.Equal(t, 3, m.Captured.Loads)
	require.Zero(t, fast.Captured.Loads, "the captures are left as they were")
	require.Nil(t, pageload.MedianGraph(nil))
}

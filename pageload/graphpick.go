package pageload

import (
	"cmp"
	"math"
	"slices"
)

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// MedianGraph is the graph whose captured load took the browser the
// median time (BrowserMs; of an even number, the faster middle one):
// one real load, its gaps consistent with one another, rather than a
// blend. Chromium's own spread shows in single captures; choosing among
// several steadies a replay. The loads may be of different network
// conditions (the web experiment's traced loads of every DNS
// configuration): their PLTs differ by the network, their browser time
// only by the browser's speed. Its Captured.Loads says among how many.
func MedianGraph(gs []*Graph) *Graph {
	if len(gs) == 0 {
		return nil
	}
	s := slices.Clone(gs)
	slices.SortStableFunc(s, func(a, b *Graph) int { return cmp.Compare(a.BrowserMs(), b.BrowserMs()) })
	m := *s[(len(s)-1)/2]
	m.Captured.Loads = len(gs)
	return &m
}

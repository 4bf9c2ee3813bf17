package testutil

import "runtime"

// HeapHeld is the heap each of n values holds once made (by value, for
// 0 to n-1) and all kept: what a reader that keeps them costs a value.
// The heap is measured after collections, twice before (the second
// frees what sync.Pools kept, which would otherwise go during the
// count), and the slice that keeps the values is made before it; keep
// (what the values are made from) is kept alive through the count, so
// that it is not freed within it. A figure to print, not to assert: a
// heap's size is the collector's to choose.
func HeapHeld(n int, keep any, value func(i int) any) float64 {
	held := make([]any, n)
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range held {
		held[i] = value(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

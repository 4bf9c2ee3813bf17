package testutil

// Seeds is how many seeds a model test walks: n, or one under the race
// detector. A race shows on a path's first walk; the breadth of seeds is
// for the logic, and the unit lane runs every test that calls Seeds
// whole, without -race (scripts/tests.sh, timedtests -seeded). The store's
// model tests ran nine times slower under -race (its pure-Go SQLite is
// instrumented too) for nothing a second seed adds there.
func Seeds(n uint64) uint64 {
	if Race {
		return min(n, 1)
	}
	return n
}

// Rounds is how many more rounds a leak test repeats after its first: n,
// or two under the race detector. A leak of every round shows in two; the
// breadth is for one that happens now and then, and the unit lane runs
// every test that calls Rounds whole, as it does Seeds' (timedtests
// -seeded lists both).
func Rounds(n int) int {
	if Race {
		return min(n, 2)
	}
	return n
}

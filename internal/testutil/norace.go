//go:build !race

package testutil

// Race says whether the tests run under the race detector (race.go).
const Race = false

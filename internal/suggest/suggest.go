// Package suggest finds the known names nearest a mistyped one, for the
// "did you mean" of commands, flags and stored IDs.
package suggest

import (
	"slices"
	"strings"

	"github.com/doxlab/doxlab/internal/printable"
)

// Nearest is up to n of known nearest to s by edit distance, nearest
// first (ties in known's order); with close set, only those within a
// third of their length plus one, or that start with s or contain it.
func Nearest(s string, known []string, n int, close bool) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, k := range known {
		d := Distance(s, k)
		if close && d > len(k)/3+1 && !strings.HasPrefix(k, s) && !strings.Contains(k, s) {
			continue
		}
		cs = append(cs, cand{k, d})
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.name)
	}
	return out
}

// Distance is the Levenshtein distance of a and b.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Closest is what an error about an unknown id adds: the closest of
// known, escaped for a terminal (stored IDs and names may come from
// another machine), or that there are none.
func Closest(id string, known []string) string {
	if len(known) == 0 {
		return " (it holds none)"
	}
	near := Nearest(id, known, 3, false)
	for i, n := range near {
		near[i] = printable.String(n)
	}
	return "; the closest it holds: " + strings.Join(near, ", ")
}

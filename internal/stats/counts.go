package stats

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Counts is counts by label, the most frequent first, ties by label:
// "REFUSED 6, timeout 2"; "" when none is above zero.
func Counts(byLabel map[string]int) string {
	labels := make([]string, 0, len(byLabel))
	for l, n := range byLabel {
		if n > 0 {
			labels = append(labels, l)
		}
	}
	slices.SortFunc(labels, func(a, b string) int { return cmp.Or(cmp.Compare(byLabel[b], byLabel[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s %d", l, byLabel[l])
	}
	return strings.Join(parts, ", ")
}

package order

import (
	"slices"
	"testing"
)

func TestCompare(t *testing.T) {
	got := []string{"doq", "custom-b", "udp", "doh2", "custom-a", "tcp"}
	slices.SortFunc(got, Compare)
	want := []string{"udp", "tcp", "doh2", "doq", "custom-a", "custom-b"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A profile's variants follow it.
	got = []string{"cable", "fiber+loss1", "custom", "fiber", "fiber+bulk", "dsl+loss1"}
	slices.SortFunc(got, Compare)
	want = []string{"fiber", "fiber+bulk", "fiber+loss1", "cable", "dsl+loss1", "custom"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Labels of two kinds agree with both.
	for _, p := range [][2]string{{"none", "fiber"}, {"none", "retry"}, {"retry", "token"}, {"resumed", "0rtt"}, {"1rtt", "0rtt"}} {
		if Compare(p[0], p[1]) >= 0 || Compare(p[1], p[0]) <= 0 {
			t.Errorf("%s should come before %s", p[0], p[1])
		}
	}
}

func TestGroup(t *testing.T) {
	keys, groups := Group([]string{"b1", "a1", "b2", "c1", "a2"}, func(s string) byte { return s[0] })
	if string(keys) != "bac" {
		t.Fatalf("keys %q, want first-seen order bac", keys)
	}
	if !slices.Equal(groups['a'], []string{"a1", "a2"}) || !slices.Equal(groups['b'], []string{"b1", "b2"}) {
		t.Fatalf("groups %v", groups)
	}
}

// Package order puts doxlab's labels (profiles, transports, conditions,
// pages, ...) in one order everywhere: tables, figures and summaries list
// fiber before DSL and UDP before DoQ, not alphabetically.
package order

import (
	"cmp"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/testbed/profiles"
)

// known lists the labels in their order: the testbed's access profiles
// (from no link to the slowest), the transports from the protocol table
// (plain to QUIC), then the rest. Labels are compared within one kind;
// the few that belong to two kinds are placed so that both agree:
// "none" comes first as a profile and before Retry as address
// validation, "0rtt" after resumption as a condition and after 1-RTT as
// an HTTP/3 handshake.
var known = slices.Concat(profiles.Names(), protocol.WithVariants(), []string{
	// measurement conditions, then HTTP/3 handshakes
	"fresh", "pam", "resumed", "1rtt", "0rtt",
	// pages, stub states, DNS modes
	"example", "wiki", "insta", "o1", "o5", "o20", "o30", "o45", "cold", "warm", "stub", "decoupled",
	// certificates, key shares, address validation, connection modes
	"small", "large", "pq", "classic", "retry", "token", "new", "persistent",
})

var rank = func() map[string]int {
	m := make(map[string]int, len(known))
	for i, l := range known {
		m[l] = i
	}
	return m
}()

// Known says whether label has a place in the order (custom profiles and
// pages do not: they sort alphabetically after the known ones).
func Known(label string) bool {
	_, ok := rank[label]
	return ok
}

// Compare orders two labels of one kind: known labels as listed, before
// unknown ones (custom profiles), which sort alphabetically. A profile's
// variant follows its base: fiber, fiber+loss1, cable.
func Compare(a, b string) int {
	ba, va, _ := strings.Cut(a, "+")
	bb, vb, _ := strings.Cut(b, "+")
	if c := compareLabel(ba, bb); c != 0 || (va == "" && vb == "") {
		return c
	}
	return strings.Compare(va, vb)
}

func compareLabel(a, b string) int {
	ra, aok := rank[a]
	rb, bok := rank[b]
	switch {
	case aok && bok:
		return cmp.Compare(ra, rb)
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}

// Group groups items by key; the keys come in the order they first appear.
func Group[T any, K comparable](items []T, key func(T) K) ([]K, map[K][]T) {
	var keys []K
	groups := map[K][]T{}
	for _, x := range items {
		k := key(x)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], x)
	}
	return keys, groups
}

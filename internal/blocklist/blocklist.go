// Package blocklist reads the prefix files that say where doxlab must
// never send traffic: a blocklist of the operator's own, and the opt-out
// requests of networks that asked not to be measured. The scanner, the
// campaigns' diallers and the page-load stub all consult one List.
package blocklist

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/internal/listfile"
)

// List is a set of prefixes never contacted, each with the file and line
// it came from, so a refusal can say why.
type List struct {
	entries []entry
	// byPrefix finds an address's entries by its prefix of each length
	// the list holds (lens), the first listed of each prefix: a scan checks
	// every target, and an opt-out list of thousands, searched in turn,
	// made a /8's plan take hours.
	byPrefix map[netip.Prefix]int
	lens     []int // the lengths of the list's prefixes, IPv6 ones offset by 256
}

// add lists p, from where it came.
func (l *List) add(p netip.Prefix, from string) {
	if l.byPrefix == nil {
		l.byPrefix = map[netip.Prefix]int{}
	}
	if _, ok := l.byPrefix[p]; !ok {
		l.byPrefix[p] = len(l.entries)
	}
	if k := lenKey(p.Addr(), p.Bits()); !slices.Contains(l.lens, k) {
		l.lens = append(l.lens, k)
	}
	l.entries = append(l.entries, entry{p, from})
}

// lenKey keys a prefix length by the family it is of.
func lenKey(a netip.Addr, bits int) int {
	if a.Is6() {
		return 256 + bits
	}
	return bits
}

type entry struct {
	prefix netip.Prefix
	from   string // FILE:LINE
}

// Read reads prefix files: an address or a prefix (IPv4 or IPv6) a line,
// # starting a comment. A bad line is named by file and line.
func Read(files ...string) (*List, error) {
	l := new(List)
	for _, f := range files {
		if err := l.read(f); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *List) read(path string) error {
	err := listfile.Each(path, func(n int, line string) error {
		p, err := ParsePrefix(line)
		if err != nil {
			return err
		}
		l.add(p, fmt.Sprintf("%s:%d", path, n))
		return nil
	})
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("reading blocklist: %w", err)
	}
	return err
}

// ParsePrefix reads an address (a prefix of its full length) or a prefix.
// An IPv4-mapped prefix (::ffff:192.0.2.0/120) is the IPv4 prefix it
// maps, as an IPv4-mapped address is judged by the IPv4 one it carries:
// kept as written, it matched no address a list checks.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix", s)
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix", s)
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Prefixes are the list's prefixes, in the order read (for a plan to
// carry to its workers).
func (l *List) Prefixes() []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.prefix.String()
	}
	return out
}

// FromPrefixes is a list of prefixes carried by a plan, each named by
// where it came from (from).
func FromPrefixes(prefixes []string, from string) (*List, error) {
	l := new(List)
	for _, s := range prefixes {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
		l.add(p, from)
	}
	return l, nil
}

// Len is how many prefixes the list holds.
func (l *List) Len() int {
	if l == nil {
		return 0
	}
	return len(l.entries)
}

// Contains says whether a is in a prefix of the list.
func (l *List) Contains(a netip.Addr) bool { return l.Check(a) != nil }

// Check is nil for an address that may be contacted, else an error
// naming the prefix and where it was listed. An address is judged
// without its zone (a zoned address is in no prefix, to netip), and a
// NAT64 address both as it is and by the IPv4 address it reaches, so an
// opt-out of an IPv4 network holds for a vantage point behind NAT64.
func (l *List) Check(a netip.Addr) error {
	if l == nil {
		return nil
	}
	a = a.Unmap().WithZone("")
	first, at := -1, a
	for _, b := range []netip.Addr{a, embedded(a)} {
		if i := l.find(b); i >= 0 && (first < 0 || i < first) {
			first, at = i, b
		}
	}
	if first < 0 {
		return nil
	}
	e := l.entries[first]
	return fmt.Errorf("%w: %s is in %s (%s)", ErrBlocked, at, e.prefix, e.from)
}

// find is the first listed entry holding a, or -1: a's prefix of each
// length the list holds, looked up.
func (l *List) find(a netip.Addr) int {
	first := -1
	for _, k := range l.lens {
		if (k >= 256) != a.Is6() {
			continue
		}
		p, err := a.Prefix(k % 256)
		if err != nil {
			continue
		}
		if i, ok := l.byPrefix[p]; ok && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

// ErrBlocked is an address a blocklist or an opt-out forbids.
var ErrBlocked = fmt.Errorf("blocklisted")

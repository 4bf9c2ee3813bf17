package blocklist

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// SpecialPrefix is a block of addresses that is not the public Internet:
// RFC 6890's special-purpose registries (as IANA keeps them, with the
// blocks added since), where a vantage point's own networks live.
type SpecialPrefix struct {
	Prefix netip.Prefix
	Name   string
}

// special are the IPv4 and IPv6 special-purpose blocks a campaign never
// contacts unless it opts in: the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (RFC 6890 and later), less the few entries that are
// globally reachable by design (anycast services such as 192.31.196.0/24),
// plus multicast and the reserved 240/4. NAT64's 64:ff9b::/96 is public
// itself; its embedded IPv4 address is checked instead (Check).
var special = func() []SpecialPrefix {
	var out []SpecialPrefix
	for _, s := range [][2]string{
		{"0.0.0.0/8", "this network (RFC 791)"},
		{"10.0.0.0/8", "private use (RFC 1918)"},
		{"100.64.0.0/10", "shared address space, CGNAT (RFC 6598)"},
		{"127.0.0.0/8", "loopback (RFC 1122)"},
		{"169.254.0.0/16", "link-local, cloud metadata (RFC 3927)"},
		{"172.16.0.0/12", "private use (RFC 1918)"},
		{"192.0.0.0/24", "IETF protocol assignments (RFC 6890)"},
		{"192.0.2.0/24", "documentation, TEST-NET-1 (RFC 5737)"},
		{"192.88.99.0/24", "6to4 relay anycast, deprecated (RFC 7526)"},
		{"192.168.0.0/16", "private use (RFC 1918)"},
		{"198.18.0.0/15", "benchmarking (RFC 2544)"},
		{"198.51.100.0/24", "documentation, TEST-NET-2 (RFC 5737)"},
		{"203.0.113.0/24", "documentation, TEST-NET-3 (RFC 5737)"},
		{"224.0.0.0/4", "multicast (RFC 5771)"},
		{"240.0.0.0/4", "reserved and limited broadcast (RFC 1112, RFC 919)"},
		{"::/128", "unspecified address (RFC 4291)"},
		{"::1/128", "loopback (RFC 4291)"},
		{"::ffff:0:0/96", "IPv4-mapped (RFC 4291)"},
		{"64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)"},
		{"100::/64", "discard-only (RFC 6666)"},
		{"2001::/23", "IETF protocol assignments (RFC 2928)"},
		{"2001:db8::/32", "documentation (RFC 3849)"},
		{"2002::/16", "6to4 (RFC 3056)"},
		{"3fff::/20", "documentation (RFC 9637)"},
		{"5f00::/16", "segment routing SIDs (RFC 9602)"},
		{"fc00::/7", "unique local (RFC 4193)"},
		{"fe80::/10", "link-local (RFC 4291)"},
		{"fec0::/10", "site-local, deprecated (RFC 3879)"},
		{"ff00::/8", "multicast (RFC 4291)"},
	} {
		out = append(out, SpecialPrefix{netip.MustParsePrefix(s[0]), s[1]})
	}
	return out
}()

// nat64 is the well-known NAT64 prefix (RFC 6052): a vantage point behind
// NAT64 reaches the IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Special is every special-purpose prefix, IPv4 first.
func Special() []SpecialPrefix { return slices.Clone(special) }

// SpecialOf is the special-purpose prefix a is in, if any. An IPv4-mapped
// or NAT64 address is judged by the IPv4 address it carries.
func SpecialOf(a netip.Addr) (SpecialPrefix, bool) {
	a = embedded(a)
	for _, s := range special {
		if s.Prefix.Contains(a) {
			return s, true
		}
	}
	return SpecialPrefix{}, false
}

// IsSpecial says whether any address of p is special-purpose.
func IsSpecial(p netip.Prefix) bool {
	for _, s := range special {
		if s.Prefix.Overlaps(p) {
			return true
		}
	}
	return false
}

// embedded is the IPv4 address an IPv4-mapped or NAT64 address carries,
// else a, without its zone: netip finds a zoned address in no prefix, so
// fe80::1%eth0 (a page's https://[fe80::1%25eth0]/) was no special one.
func embedded(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return a
}

// ErrSpecial is a special-purpose address a policy does not allow.
var ErrSpecial = errors.New("special-purpose address not allowed")

// Policy is where a campaign may send traffic from a vantage point: never
// into its blocklist's or opt-out files' prefixes, and into a
// special-purpose block (loopback, link-local and cloud metadata,
// private networks, ...) only where it opts in, as a campaign on a
// testbed or in a lab does. The zero Policy refuses every
// special-purpose address; a nil *Policy refuses nothing.
type Policy struct {
	Block *List          // the blocklist and opt-out files: refused even where allowed
	Allow []netip.Prefix // special-purpose prefixes the campaign opts into
}

// Check is nil for an address the policy lets a campaign contact, else
// an error saying which list (ErrBlocked) or block (ErrSpecial) refuses
// it and why.
func (p *Policy) Check(a netip.Addr) error {
	if p == nil {
		return nil
	}
	if err := p.Block.Check(a); err != nil {
		return err
	}
	a = embedded(a)
	if p.Allowed(a) {
		return nil
	}
	if s, ok := SpecialOf(a); ok {
		return fmt.Errorf("%w: %s is in %s, %s (a campaign reaches such addresses only where its allow_special lists them)", ErrSpecial, a, s.Prefix, s.Name)
	}
	return nil
}

// Allowed says whether a is in a prefix the campaign opted into.
func (p *Policy) Allowed(a netip.Addr) bool {
	a = embedded(a)
	for _, al := range p.Allow {
		if al.Contains(a) {
			return true
		}
	}
	return false
}

// RefusesAll is the special-purpose block that holds every address of
// pre, where no prefix the policy allows reaches into pre: a range the
// policy refuses whole, said without expanding it.
func (p *Policy) RefusesAll(pre netip.Prefix) (SpecialPrefix, bool) {
	for _, a := range p.Allow {
		if a.Overlaps(pre) {
			return SpecialPrefix{}, false
		}
	}
	for _, s := range special {
		if s.Prefix.Bits() <= pre.Bits() && s.Prefix.Contains(pre.Addr()) {
			return s, true
		}
	}
	return SpecialPrefix{}, false
}

// ParseAllow reads a campaign's allow_special prefixes: each must be (or
// lie in) a special-purpose block, since nothing else is refused.
func ParseAllow(prefixes []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range prefixes {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		if !IsSpecial(p) {
			return nil, fmt.Errorf("%s is not special-purpose: only special-purpose addresses (RFC 6890) are refused by default, so it needs no allowing", p)
		}
		out = append(out, p)
	}
	return out, nil
}

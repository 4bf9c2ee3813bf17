package blocklist

import (
	"errors"
	"net/netip"
	"testing"
)

// TestPolicy checks the special-purpose default, the opt-in, the
// blocklist's precedence, and addresses that carry IPv4 inside IPv6.
func TestPolicy(t *testing.T) {
	block, err := FromPrefixes([]string{"10.1.0.0/16", "93.184.0.0/16"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	allow, err := ParseAllow([]string{"10.0.0.0/8", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{Block: block, Allow: allow}
	for addr, want := range map[string]error{
		"127.0.0.1":            ErrSpecial,
		"169.254.169.254":      ErrSpecial,
		"100.64.1.1":           ErrSpecial,
		"192.168.1.1":          ErrSpecial,
		"0.1.2.3":              ErrSpecial,
		"224.0.0.251":          ErrSpecial,
		"255.255.255.255":      ErrSpecial,
		"::1":                  ErrSpecial,
		"fe80::1":              ErrSpecial,
		"ff02::fb":             ErrSpecial,
		"::ffff:127.0.0.1":     ErrSpecial, // IPv4-mapped
		"64:ff9b::a9fe:a9fe":   ErrSpecial, // NAT64 of 169.254.169.254
		"10.2.3.4":             nil,        // allowed
		"fd12::1":              nil,        // allowed
		"10.1.2.3":             ErrBlocked, // blocklisted though allowed
		"93.184.215.14":        ErrBlocked,
		"1.1.1.1":              nil,
		"2606:4700:4700::1111": nil,
		"64:ff9b::101:101":     nil, // NAT64 of 1.1.1.1
	} {
		err := p.Check(netip.MustParseAddr(addr))
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want %v", addr, err, want)
		}
	}
	var none *Policy
	if err := none.Check(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("a nil policy refuses nothing: %v", err)
	}
	if _, err := ParseAllow([]string{"8.8.8.0/24"}); err == nil {
		t.Error("allowing a public prefix is refused: it was never blocked")
	}
	if _, err := ParseAllow([]string{"nope"}); err == nil {
		t.Error("a bad prefix is refused")
	}
}

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

// TestZonedAndEmbeddedAddresses: an address is judged as the packets
// it makes would be. netip finds a zoned address in no prefix, so a
// page's https://[fe80::1%25eth0]/ was no special-purpose address and
// passed every check; a NAT64 address of an opted-out IPv4 network
// passed the opt-out; and a list or allow_special prefix written in its
// IPv4-mapped form matched nothing.
func TestZonedAndEmbeddedAddresses(t *testing.T) {
	for _, addr := range []string{"fe80::1%eth0", "fe80::a9fe:a9fe%1", "ff02::1%lo", "::1%lo", "fd00::1%eth0"} {
		a := netip.MustParseAddr(addr)
		if _, ok := SpecialOf(a); !ok {
			t.Errorf("%s: not special-purpose", addr)
		}
		if err := (&Policy{}).Check(a); !errors.Is(err, ErrSpecial) {
			t.Errorf("%s: %v, want refused", addr, err)
		}
	}
	opt, err := FromPrefixes([]string{"192.0.2.0/24", "fe80::/10", "::ffff:198.51.100.0/120", "2001:db8:1::7%eth0"}, "optout")
	if err != nil {
		t.Fatal(err)
	}
	if got := opt.Prefixes(); got[2] != "198.51.100.0/24" || got[3] != "2001:db8:1::7/128" {
		t.Errorf("a mapped prefix and a zoned address read as %v", got)
	}
	for addr, blocked := range map[string]bool{
		"64:ff9b::c000:207":   true, // NAT64 of 192.0.2.7
		"::ffff:192.0.2.7":    true,
		"fe80::1%eth0":        true,
		"198.51.100.9":        true, // by its mapped prefix
		"::ffff:198.51.100.9": true,
		"2001:db8:1::7%eth1":  true,
		"64:ff9b::c633:6301":  false, // NAT64 of 198.51.99.1
		"192.0.3.1":           false,
	} {
		err := opt.Check(netip.MustParseAddr(addr))
		if (err != nil) != blocked || (err != nil && !errors.Is(err, ErrBlocked)) {
			t.Errorf("%s: %v, want blocked %v", addr, err, blocked)
		}
	}
	// An operator's list of NAT64 itself still holds NAT64's addresses,
	// and only them.
	nat, err := FromPrefixes([]string{"64:ff9b::/96"}, "ours")
	if err != nil {
		t.Fatal(err)
	}
	if nat.Check(netip.MustParseAddr("64:ff9b::101:101")) == nil || nat.Check(netip.MustParseAddr("1.1.1.1")) != nil {
		t.Error("a list of 64:ff9b::/96 blocks NAT64's addresses and no IPv4 one")
	}
	allow, err := ParseAllow([]string{"::ffff:10.0.0.0/104"})
	if err != nil || !(&Policy{Allow: allow}).Allowed(netip.MustParseAddr("10.1.2.3")) {
		t.Errorf("allow_special in its mapped form: %v %v", allow, err)
	}
	if _, err := ParseAllow([]string{"::ffff:8.8.8.0/120"}); err == nil {
		t.Error("a public prefix in its mapped form is allowed: it was never blocked")
	}
}

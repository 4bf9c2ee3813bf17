package blocklist

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "block.txt")
	b := filepath.Join(dir, "optout.txt")
	os.WriteFile(a, []byte("# ours\n10.0.0.0/8\n\n192.0.2.7 # one host\n"), 0o644)
	os.WriteFile(b, []byte("2001:db8::/32\n"), 0o644)
	l, err := Read(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for addr, blocked := range map[string]bool{"10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false, "::ffff:10.0.0.1": true, "2001:db8::53": true, "2001:db9::1": false} {
		err := l.Check(netip.MustParseAddr(addr))
		if (err != nil) != blocked || (err != nil && !errors.Is(err, ErrBlocked)) {
			t.Errorf("%s: %v, want blocked %v", addr, err, blocked)
		}
	}
	if err := l.Check(netip.MustParseAddr("192.0.2.7")); !strings.Contains(err.Error(), "block.txt:4") {
		t.Errorf("the refusal does not say where it was listed: %v", err)
	}
	if got := strings.Join(l.Prefixes(), ","); got != "10.0.0.0/8,192.0.2.7/32,2001:db8::/32" {
		t.Errorf("prefixes %s", got)
	}
	again, err := FromPrefixes(l.Prefixes(), "plan")
	if err != nil || again.Len() != 3 || !again.Contains(netip.MustParseAddr("10.9.9.9")) {
		t.Errorf("a plan's copy: %v %v", again, err)
	}
	os.WriteFile(a, []byte("10.0.0.0/8\nnot-an-address\n"), 0o644)
	if _, err := Read(a); err == nil || !strings.Contains(err.Error(), "block.txt:2") {
		t.Errorf("a bad line is not named: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing file is accepted")
	}
	var none *List
	if none.Check(netip.MustParseAddr("10.0.0.1")) != nil {
		t.Error("no list blocks")
	}
}

// TestCheckFindsTheFirstListed: a list found by prefix length answers
// as a list searched in turn would: blocked or not, and by the first
// prefix listed that holds the address, nested prefixes and both
// families mixed.
func TestCheckFindsTheFirstListed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr {
		if r.IntN(4) == 0 {
			b := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4))}
			b[15] = byte(r.IntN(256))
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(256))})
	}
	for range 200 {
		var prefixes []string
		for range 1 + r.IntN(30) {
			a := addr()
			p, _ := a.Prefix(r.IntN(a.BitLen() + 1))
			prefixes = append(prefixes, p.String())
		}
		l, err := FromPrefixes(prefixes, "test")
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			a := addr()
			want := -1
			for i, p := range prefixes {
				if netip.MustParsePrefix(p).Contains(a) {
					want = i
					break
				}
			}
			err := l.Check(a)
			switch {
			case want < 0 && err != nil:
				t.Fatalf("%s: %v, in none of %v", a, err, prefixes)
			case want >= 0 && (err == nil || !strings.Contains(err.Error(), " is in "+prefixes[want]+" ")):
				t.Fatalf("%s: %v, want the first of %v that holds it: %s", a, err, prefixes, prefixes[want])
			}
		}
	}
}

// BenchmarkCheck checks addresses against an opt-out list of 10,000
// prefixes, as a scan's plan checks each target.
func BenchmarkCheck(b *testing.B) {
	var prefixes []string
	for i := range 10_000 {
		prefixes = append(prefixes, netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}).String()+"/24")
	}
	l, err := FromPrefixes(prefixes, "optout")
	if err != nil {
		b.Fatal(err)
	}
	a := netip.MustParseAddr("8.8.8.8")
	for b.Loop() {
		if l.Check(a) != nil {
			b.Fatal("blocked")
		}
	}
}

// FuzzPrefixes: whatever lines a blocklist or opt-out file holds, they
// are refused, or read into a list that a plan carries to its workers
// as the same list (Prefixes, then FromPrefixes), that refuses the
// first and last address of each prefix it lists (an IPv4-mapped one
// judged by its IPv4 address), naming the prefix a search in turn finds
// first.
func FuzzPrefixes(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8\n192.0.2.7", "2001:db8::/32\n::ffff:198.51.100.0/120", "fe80::1%eth0", "0.0.0.0/0\n::/0", "1.2.3.4/33", "::ffff:1.2.3.4/95"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		l, err := FromPrefixes(strings.Split(in, "\n"), "fuzz")
		if err != nil {
			return
		}
		again, err := FromPrefixes(l.Prefixes(), "again")
		if err != nil {
			t.Fatalf("a plan's prefixes do not read back: %v", err)
		}
		if strings.Join(again.Prefixes(), " ") != strings.Join(l.Prefixes(), " ") {
			t.Fatalf("read back as %v, not %v", again.Prefixes(), l.Prefixes())
		}
		for _, e := range l.entries {
			first, last := e.prefix.Addr(), lastOf(e.prefix)
			for _, a := range []netip.Addr{first, last} {
				// An IPv4-mapped address is judged by the IPv4 address it
				// carries (::/0 lists no IPv4 address).
				i := slicesIndexFirst(l, a.Unmap())
				err := l.Check(a)
				switch {
				case i < 0 && err != nil:
					t.Fatalf("%s: refused by %v, listed nowhere", a, err)
				case i < 0:
				case err == nil:
					t.Fatalf("%s lists %s and lets it through", l.entries[i].prefix, a)
				case !strings.Contains(err.Error(), l.entries[i].prefix.String()):
					t.Fatalf("%s: refused by %v, where %s is listed first", a, err, l.entries[i].prefix)
				}
			}
		}
	})
}

// lastOf is p's last address.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// slicesIndexFirst is the first entry of l holding a: a search in turn.
func slicesIndexFirst(l *List, a netip.Addr) int {
	for i, e := range l.entries {
		if e.prefix.Contains(a) {
			return i
		}
	}
	return -1
}

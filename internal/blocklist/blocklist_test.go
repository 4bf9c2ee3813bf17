package blocklist

import (
	"errors"
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

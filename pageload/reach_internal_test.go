package pageload

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/blocklist"
)

// TestReachable: a page's first address places it, and another host is
// refused every address in a special-purpose block but the page's own,
// however it is written (IPv4-mapped, NAT64), and keeps its public
// addresses.
func TestReachable(t *testing.T) {
	for _, c := range []struct {
		doc     string // the document's address, placed: see TestPlacing
		sub     []string
		keep    []string // nil: refused
		refused string
	}{
		// A public page: none of the machine's or network's own.
		{"198.51.99.7", []string{"169.254.169.254"}, nil, "169.254.0.0/16 (link-local"},
		{"198.51.99.7", []string{"127.0.0.1"}, nil, "127.0.0.0/8 (loopback"},
		{"198.51.99.7", []string{"10.0.0.1"}, nil, "10.0.0.0/8 (private use"},
		{"198.51.99.7", []string{"::1"}, nil, "::1/128 (loopback"},
		{"198.51.99.7", []string{"fe80::1"}, nil, "fe80::/10 (link-local"},
		{"198.51.99.7", []string{"::ffff:127.0.0.1"}, nil, "127.0.0.0/8"},
		{"198.51.99.7", []string{"64:ff9b::a9fe:a9fe"}, nil, "169.254.0.0/16"},
		{"198.51.99.7", []string{"1.1.1.1"}, []string{"1.1.1.1"}, ""},
		{"198.51.99.7", []string{"127.0.0.1", "1.1.1.1", "::1"}, []string{"1.1.1.1"}, ""},
		// A page on loopback reaches loopback, and nothing else special.
		{"127.0.0.1", []string{"127.0.0.2"}, []string{"127.0.0.2"}, ""},
		{"127.0.0.1", []string{"169.254.169.254"}, nil, "169.254.0.0/16"},
		{"127.0.0.1", []string{"10.200.0.5"}, nil, "10.0.0.0/8"},
		// A page on the testbed reaches the testbed's hosts.
		{"10.200.0.5", []string{"10.200.0.7"}, []string{"10.200.0.7"}, ""},
		{"10.200.0.5", []string{"127.0.0.1"}, nil, "127.0.0.0/8"},
	} {
		// The page's URL names its address: it is placed there.
		ld := &load{docHost: c.doc, docLiteral: netip.MustParseAddr(c.doc)}
		got, err := ld.reachable(c.doc, addrs(c.doc))
		require.NoError(t, err, "the page's URL names %s", c.doc)
		require.Equal(t, addrs(c.doc), got)
		got, err = ld.reachable("sub.example", addrs(c.sub...))
		if c.keep == nil {
			require.ErrorIs(t, err, blocklist.ErrSpecial, "%s from a page at %s", c.sub, c.doc)
			require.ErrorContains(t, err, c.refused)
			require.ErrorContains(t, err, "sub.example is at "+c.sub[0])
			continue
		}
		require.NoError(t, err, "%s from a page at %s", c.sub, c.doc)
		require.Equal(t, addrs(c.keep...), got)
	}
}

// TestPlacing: a resolver's answer places a page by name only outside
// the special-purpose blocks, or in one the loader allows: a measured
// resolver, or the page's own DNS, that answers the page's name with the
// machine's loopback or its cloud's metadata service is refused, as is a
// later answer that rebinds the name there.
func TestPlacing(t *testing.T) {
	testbed := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		allow   []netip.Prefix
		doc     []string
		keep    []string // nil: refused
		refused string
	}{
		{nil, []string{"198.51.99.7"}, []string{"198.51.99.7"}, ""},
		{nil, []string{"127.0.0.1"}, nil, "the page's host page.example is at 127.0.0.1, in 127.0.0.0/8 (loopback"},
		{nil, []string{"169.254.169.254"}, nil, "169.254.0.0/16 (link-local"},
		{nil, []string{"::ffff:169.254.169.254"}, nil, "169.254.0.0/16"},
		{nil, []string{"fe80::1%eth0"}, nil, "fe80::/10"},
		{nil, []string{"10.200.0.5"}, nil, "10.0.0.0/8 (private use"},
		{nil, []string{"127.0.0.1", "198.51.99.7"}, []string{"198.51.99.7"}, ""},
		{testbed, []string{"10.200.0.5"}, []string{"10.200.0.5"}, ""},
		{testbed, []string{"127.0.0.1"}, nil, "127.0.0.0/8"},
	} {
		ld := &load{docHost: "page.example", allow: blocklist.Policy{Allow: c.allow}}
		got, err := ld.reachable("page.example", addrs(c.doc...))
		if c.keep == nil {
			require.ErrorIs(t, err, blocklist.ErrSpecial, "%s allowing %s", c.doc, c.allow)
			require.ErrorContains(t, err, c.refused)
			require.False(t, ld.docPlaced, "a refused answer places nothing")
			continue
		}
		require.NoError(t, err, "%s allowing %s", c.doc, c.allow)
		require.Equal(t, addrs(c.keep...), got)
	}
	// The first address places the page, once: a later answer for the
	// page's name cannot move it into a special-purpose block.
	ld := &load{docHost: "page.example"}
	_, err := ld.reachable("page.example", addrs("198.51.99.7"))
	require.NoError(t, err)
	_, err = ld.reachable("page.example", addrs("127.0.0.1"))
	require.ErrorIs(t, err, blocklist.ErrSpecial, "rebound to loopback")
	_, err = ld.reachable("sub.example", addrs("127.0.0.1"))
	require.ErrorIs(t, err, blocklist.ErrSpecial, "still a public page")
	// A page the loader allows on loopback reaches loopback and no other
	// special-purpose block.
	ld = &load{docHost: "page.example", allow: blocklist.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	_, err = ld.reachable("page.example", addrs("127.0.0.1"))
	require.NoError(t, err)
	_, err = ld.reachable("sub.example", addrs("127.0.0.9"))
	require.NoError(t, err)
	_, err = ld.reachable("meta.example", addrs("169.254.169.254"))
	require.ErrorIs(t, err, blocklist.ErrSpecial)
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

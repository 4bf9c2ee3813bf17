package pageload

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/blocklist"
)

// TestReachable: the document's host may be anywhere, and its first
// address places the page; another host is refused every address in a
// special-purpose block but the page's own, however it is written
// (IPv4-mapped, NAT64), and keeps its public addresses.
func TestReachable(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, c := range []struct {
		doc     string // the document's address
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
		ld := &load{docHost: "page.example"}
		got, err := ld.reachable("page.example", addrs(c.doc))
		require.NoError(t, err, "the document's host may be anywhere")
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
	// The first address of the document places the page, once: a
	// later lookup of the document's host does not move it.
	ld := &load{docHost: "page.example"}
	_, err := ld.reachable("page.example", addrs("198.51.99.7"))
	require.NoError(t, err)
	_, err = ld.reachable("page.example", addrs("127.0.0.1"))
	require.NoError(t, err)
	_, err = ld.reachable("sub.example", addrs("127.0.0.1"))
	require.True(t, errors.Is(err, blocklist.ErrSpecial), "still a public page: %v", err)
}

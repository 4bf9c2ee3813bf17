package scan

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPermutationVisitsEachOnce: every target is probed exactly once,
// in an order that is not the targets' own.
func TestPermutationVisitsEachOnce(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 100, 1021, 4096} {
		pm := newPermutation(n)
		seen := make([]bool, n)
		count, inOrder := uint64(0), true
		for {
			v, ok := pm.next()
			if !ok {
				break
			}
			require.Less(t, v, n)
			require.False(t, seen[v], "n=%d: %d twice", n, v)
			seen[v] = true
			inOrder = inOrder && v == count
			count++
		}
		require.Equal(t, n, count, "n=%d: every one", n)
		if n >= 100 {
			require.False(t, inOrder, "n=%d: shuffled", n)
		}
	}
}

// TestAnswersAreCheckedAgainstTheirProbe: an answer counts only from
// the address its probe went to (the IDs are keyed to it), so a spoofed
// or stray packet is no finding; a DNS answer needs its ID and the QR
// bit, and says its rcode.
func TestAnswersAreCheckedAgainstTheirProbe(t *testing.T) {
	key := []byte("0123456789abcdef")
	a := netip.MustParseAddrPort("192.0.2.7:53")
	b := netip.MustParseAddrPort("192.0.2.8:53")
	q := probeFor(key, target{a, "do53"})
	require.Len(t, q, 12)
	answer := func(q []byte, rcode byte) []byte {
		r := append([]byte(nil), q...)
		r[2] |= 0x80
		r[3] = r[3]&0xf0 | rcode
		return r
	}
	r, ok := validate(key, a, answer(q, 1))
	require.True(t, ok)
	require.Equal(t, Result{Target: "192.0.2.7:53", Kind: "do53", Rcode: "FORMERR"}, r)
	r, _ = validate(key, a, answer(q, 9))
	require.Equal(t, "9", r.Rcode, "an rcode without a name, as its number")
	_, ok = validate(key, b, answer(q, 1))
	require.False(t, ok, "the same answer from another address")
	_, ok = validate(key, a, q)
	require.False(t, ok, "the query echoed back (no QR bit)")
	_, ok = validate(key, a, answer(q, 1)[:11])
	require.False(t, ok, "truncated")
	_, ok = validate([]byte("another key....."), a, answer(q, 1))
	require.False(t, ok, "another scan's answer")
}

// TestPlanLeavesOutBlocked: the ranges expand to a target per address
// and port, minus the blocklist's and opt-outs' prefixes, which are
// counted; a single address is a /32 and IPv6 is refused.
func TestPlanLeavesOutBlocked(t *testing.T) {
	dir := t.TempDir()
	block := filepath.Join(dir, "block")
	opt := filepath.Join(dir, "optout")
	require.NoError(t, os.WriteFile(block, []byte("# ours\n192.0.2.0/30\n"), 0o644))
	require.NoError(t, os.WriteFile(opt, []byte("192.0.2.9\n"), 0o644))
	s := &Spec{Ranges: []string{"192.0.2.0/28", "198.51.100.1"}, Rate: 10, QUICPorts: []int{853}, DNSPorts: []int{53}, Blocklist: []string{block}, OptOut: []string{opt},
		AllowSpecial: []string{"192.0.2.0/24", "198.51.100.0/24"}} // documentation blocks, never routed
	targets, blocked, special, err := s.plan()
	require.NoError(t, err)
	require.Zero(t, special)
	require.Equal(t, (4+1)*2, blocked, "four blocked addresses and one opted out, two ports each")
	require.Len(t, targets, (16-5+1)*2)
	for _, x := range targets {
		a := x.addr.Addr()
		require.False(t, netip.MustParsePrefix("192.0.2.0/30").Contains(a) || a == netip.MustParseAddr("192.0.2.9"), "%s probed", x.addr)
	}
	_, err = parsePrefix("2001:db8::/64")
	require.ErrorContains(t, err, "not an IPv4 prefix")
	p, err := parsePrefix(" 192.0.2.77/24 ")
	require.NoError(t, err)
	require.Equal(t, "192.0.2.0/24", p.String(), "masked")
}

// TestPlanSkipsSpecialPurpose: in ranges that hold public addresses too,
// the special-purpose ones the spec does not allow are skipped and
// counted, the allowed block is planned, and an allowed address on the
// blocklist stays blocked; ranges all special and not allowed are
// refused, by Check too, before anything is expanded.
func TestPlanSkipsSpecialPurpose(t *testing.T) {
	block := filepath.Join(t.TempDir(), "block")
	require.NoError(t, os.WriteFile(block, []byte("198.51.100.1\n"), 0o644))
	s := &Spec{Ranges: []string{"192.0.2.0/30", "198.51.100.0/30", "8.8.8.8", "169.254.169.254", "255.255.255.255"}, Rate: 10, QUICPorts: []int{853},
		AllowSpecial: []string{"198.51.100.0/24"}, Blocklist: []string{block}}
	targets, blocked, special, err := s.plan()
	require.NoError(t, err)
	var got []string
	for _, x := range targets {
		got = append(got, x.addr.Addr().String())
	}
	require.ElementsMatch(t, []string{"198.51.100.0", "198.51.100.2", "198.51.100.3", "8.8.8.8"}, got)
	require.Equal(t, 1, blocked, "allowed, but on the blocklist")
	require.Equal(t, 4+1+1, special, "TEST-NET-1, the metadata service and broadcast")

	s = &Spec{Ranges: []string{"10.0.0.0/9", "172.16.5.0/24"}, Rate: 1e7, AllowFast: true, AllowLarge: true, QUICPorts: []int{853}}
	require.ErrorContains(t, s.Check(), "range 10.0.0.0/9 is in 10.0.0.0/8, private use (RFC 1918), and is special-purpose")
	s.AllowSpecial = []string{"172.16.0.0/12"}
	require.NoError(t, s.Check(), "one range allowed: the other's addresses are skipped as planned")
}

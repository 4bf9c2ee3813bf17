package measure_test

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/transport"
)

// randomTarget is a host, an address or something that looks like one,
// from pieces a targets file or a typo gives: names with the octets URLs
// treat apart (# ? @ % : / [ ]), addresses bracketed or not, zones.
func randomTarget(r *rand.Rand) string {
	label := func() string {
		const chars = "abcxyz019-_"
		const odd = "#?@%:/[]!$&'()*+,;=~ .\\"
		var b strings.Builder
		for range 1 + r.IntN(8) {
			if r.IntN(12) == 0 {
				b.WriteByte(odd[r.IntN(len(odd))])
			} else {
				b.WriteByte(chars[r.IntN(len(chars))])
			}
		}
		return b.String()
	}
	switch r.IntN(6) {
	case 0:
		return netip.AddrFrom4([4]byte{192, 0, 2, byte(r.IntN(256))}).String()
	case 1:
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(256))}).String()
		switch r.IntN(3) {
		case 0:
			return "[" + a + "]"
		case 1:
			return a + "%eth0"
		}
		return a
	}
	var labels []string
	for range 1 + r.IntN(4) {
		labels = append(labels, label())
	}
	name := strings.Join(labels, ".")
	if r.IntN(5) == 0 {
		name += "."
	}
	return name
}

// TestEveryTargetAPlanTakesIsOneAWorkerReaches: a target a plan accepts
// (CheckTarget, where a campaign's targets are refused before any job
// exists) becomes, at each vantage point, one URL a transport for each
// protocol (URLFor); that URL must parse, and name the same host, or the
// worker fails every task of it, or measures another host than the plan
// named.
func TestEveryTargetAPlanTakesIsOneAWorkerReaches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	var names []string
	for _, n := range protocol.Names(nil) {
		if tr, _ := protocol.Lookup(n); !tr.Relayed {
			names = append(names, n)
		}
	}
	accepted := 0
	for range 20000 {
		target := randomTarget(r)
		if measure.CheckTarget(target) != nil || strings.Contains(target, "://") {
			continue
		}
		accepted++
		for _, n := range names {
			u, err := measure.URLFor(n, target)
			require.NoError(t, err, "%s over %s", target, n)
			ep, err := transport.ParseURL(u)
			require.NoError(t, err, "target %q accepted by the plan, but over %s its URL %s is refused", target, n, u)
			require.Equal(t, strings.ToLower(strings.Trim(target, "[]")), strings.ToLower(ep.Host), "target %q over %s (%s)", target, n, u)
		}
	}
	require.Greater(t, accepted, 100, "the generator gives targets the plan takes")
}

// Package confine gives an untrusted browser at a vantage point a network
// of its own: a network namespace joined to the vantage point's by a veth
// pair, its traffic sent on with the vantage point's address (NAT), and
// two firewalls that keep every page, and every answer a measured
// resolver gives, out of the vantage point's own networks.
//
// In the browser's namespace (nftables, table inet doxlab), a new
// connection may go to the stub's port 53 on the far end of the pair,
// and otherwise nowhere in the policy's blocklist, nowhere in a
// special-purpose block (loopback, link-local and cloud metadata, private
// networks, CGNAT, ...) the policy does not allow, and to none of the
// vantage point's own addresses; IPv6 goes nowhere (the vantage point's
// IPv6 is not forwarded: turning its forwarding on would stop it taking
// router advertisements). A refused TCP connection is reset and any other
// packet answered "administratively prohibited", at once and before it
// leaves the namespace, and each refused destination (address, protocol,
// port) is recorded for the load that tried it. In the vantage point's
// namespace (table inet doxlab_page_N), the pair may reach the stub and
// nothing else of the machine, and forwarding is allowed from the pair
// and back to it only.
//
// Everything is made with iproute2's ip and nftables' nft, which a page
// worker's image carries, and removed by Close; what a killed worker
// leaves behind is removed by the next one on the machine.
package confine

import (
	"errors"
	"net/netip"
)

// Refusal is a destination the browser's firewall refused.
type Refusal struct {
	Addr  string `json:"addr"`
	Proto string `json:"proto"` // tcp or udp
	Port  int    `json:"port"`
}

// ErrUnsupported is confinement asked for where it cannot be had.
var ErrUnsupported = errors.New("a confined browser needs Linux network namespaces and nftables")

// stubPort is the one port of the vantage point the browser may reach.
const stubPort = 53

// Addresses: each browser namespace takes a /30 of 198.18.0.0/16 (RFC
// 2544's benchmarking block, special-purpose, so never a destination a
// page may have), the vantage side .1 and the browser .2.
var pool = netip.MustParsePrefix("198.18.0.0/16")

// maxNets is how many /30s the pool holds.
const maxNets = 1 << (32 - 16 - 2)

// subnet is the n-th /30 of the pool: the vantage side's and the
// browser's addresses.
func subnet(n int) (vantage, browser netip.Addr) {
	b := pool.Addr().As4()
	off := uint32(n) * 4
	b[2], b[3] = byte(off>>8), byte(off)
	base := netip.AddrFrom4(b)
	return base.Next(), base.Next().Next()
}

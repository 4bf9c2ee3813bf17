package server

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPoolEvictsFromTheSourceHoldingMost: at the limit with every
// connection busy, a newcomer takes the slot of the source that holds
// the most; one from that source itself, or when sources hold alike, is
// refused.
func TestPoolEvictsFromTheSourceHoldingMost(t *testing.T) {
	p := newPool(4, 3, time.Hour)
	addr := func(last byte) net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, last), Port: 1} }
	var heavy []*slot
	for range 3 {
		sl, why, _, _ := p.admit(addr(2), func() {})
		require.NotNil(t, sl, why)
		sl.begin()
		heavy = append(heavy, sl)
	}
	light, _, _, _ := p.admit(addr(3), func() {})
	light.begin()

	_, why, victim, _ := p.admit(addr(2), func() {})
	require.Equal(t, ReasonSourceLimit, why)
	require.Nil(t, victim)

	sl, why, victim, _ := p.admit(addr(4), func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, heavy, victim, "the busy source holding three gives one up")

	// .2 holds 2, .3 and .4 one each: a newcomer still takes one of .2's.
	sl.begin()
	sl, why, victim, _ = p.admit(addr(5), func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, heavy, victim)
	// Now each source holds one: nobody holds more than its share, and
	// nothing is idle, so a newcomer is refused.
	sl.begin()
	_, why, victim, _ = p.admit(addr(6), func() {})
	require.Equal(t, ReasonConnLimit, why)
	require.Nil(t, victim)
}

// TestPoolSparesTheFewestHeld: an idle connection (one in its handshake,
// say) of a client holding one is never closed to make room for a source
// that holds more; an idle one of the source holding the most is.
func TestPoolSparesTheFewestHeld(t *testing.T) {
	p := newPool(5, 4, time.Hour)
	addr := func(last byte) net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, last), Port: 1} }
	good, _, _, _ := p.admit(addr(1), func() {}) // idle: in its handshake
	var flood []*slot
	for range 4 {
		sl, _, _, _ := p.admit(addr(2), func() {})
		sl.begin()
		flood = append(flood, sl)
	}
	// A third source: the flood's source holds 4, more than its 1 would.
	sl, why, victim, _ := p.admit(addr(3), func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, flood, victim, "busy, but its source holds the most")
	require.NotEqual(t, good, victim)
	// The flood's source again (3 held, 4 with this one): the idle
	// connection of the client holding one is spared.
	sl.begin()
	_, why, victim, _ = p.admit(addr(2), func() {})
	require.Equal(t, ReasonConnLimit, why)
	require.Nil(t, victim)
}

// TestPoolClosesStalledFirst: at the limit with every connection busy
// and every source holding one, a connection whose answer has waited
// past the stall time for the client to take it is closed to make room;
// one whose writes move on is not.
func TestPoolClosesStalledFirst(t *testing.T) {
	p := newPool(3, 3, 300*time.Millisecond)
	addr := func(last byte) net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, last), Port: 1} }
	var held []*slot
	for i := range 3 {
		sl, why, _, _ := p.admit(addr(byte(i+1)), func() {})
		require.NotNil(t, sl, why)
		sl.begin()
		held = append(held, sl)
	}
	held[0].writeBegin() // an answer the client never takes
	held[1].writeBegin() // one it takes, slowly
	_, why, _, _ := p.admit(addr(9), func() {})
	require.Equal(t, ReasonConnLimit, why, "nothing stalled yet")
	for range 3 {
		time.Sleep(120 * time.Millisecond)
		held[1].writeEnd()
		held[1].writeBegin()
	}
	sl, why, victim, chosen := p.admit(addr(9), func() {})
	require.NotNil(t, sl, why)
	require.Equal(t, held[0], victim)
	require.Contains(t, chosen, "stalled")
}

// TestPoolGroupsSourcesByNetwork: many addresses of one network keeping
// every connection busy, one each, give one up to a newcomer from
// another network; a newcomer from their own network is refused.
func TestPoolGroupsSourcesByNetwork(t *testing.T) {
	p := newPool(4, 4, time.Hour)
	var flood []*slot
	for i := range 4 {
		sl, why, _, _ := p.admit(&net.UDPAddr{IP: net.IPv4(10, 1, 0, byte(i+1)), Port: 1}, func() {})
		require.NotNil(t, sl, why)
		sl.begin()
		flood = append(flood, sl)
	}
	_, why, _, _ := p.admit(&net.UDPAddr{IP: net.IPv4(10, 1, 0, 9), Port: 1}, func() {})
	require.Equal(t, ReasonConnLimit, why, "one of the network's own")
	sl, why, victim, chosen := p.admit(&net.UDPAddr{IP: net.IPv4(10, 2, 0, 1), Port: 1}, func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, flood, victim)
	require.Contains(t, chosen, "its network 10.1.0.0/24 holding the most (4)")
	// IPv6 sources group by /48 the same way.
	p = newPool(2, 2, time.Hour)
	for _, a := range []string{"2001:db8:1:1::1", "2001:db8:1:2::1"} {
		sl, _, _, _ := p.admit(&net.UDPAddr{IP: net.ParseIP(a), Port: 1}, func() {})
		sl.begin()
	}
	sl, why, _, chosen = p.admit(&net.UDPAddr{IP: net.ParseIP("2001:db8:2::1"), Port: 1}, func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, chosen, "2001:db8:1::/48")
}

package server

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoolEvictsFromTheSourceHoldingMost: at the limit with every
// connection busy, a newcomer takes the slot of the source that holds
// the most; one from that source itself, or when sources hold alike, is
// refused.
func TestPoolEvictsFromTheSourceHoldingMost(t *testing.T) {
	p := newPool(4, 3)
	addr := func(last byte) net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, last), Port: 1} }
	var heavy []*slot
	for range 3 {
		sl, why, _ := p.admit(addr(2), func() {})
		require.NotNil(t, sl, why)
		sl.begin()
		heavy = append(heavy, sl)
	}
	light, _, _ := p.admit(addr(3), func() {})
	light.begin()

	_, why, victim := p.admit(addr(2), func() {})
	require.Equal(t, ReasonSourceLimit, why)
	require.Nil(t, victim)

	sl, why, victim := p.admit(addr(4), func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, heavy, victim, "the busy source holding three gives one up")

	// .2 holds 2, .3 and .4 one each: a newcomer still takes one of .2's.
	sl.begin()
	sl, why, victim = p.admit(addr(5), func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, heavy, victim)
	// Now each source holds one: nobody holds more than its share, and
	// nothing is idle, so a newcomer is refused.
	sl.begin()
	_, why, victim = p.admit(addr(6), func() {})
	require.Equal(t, ReasonConnLimit, why)
	require.Nil(t, victim)
}

// TestPoolSparesTheFewestHeld: an idle connection (one in its handshake,
// say) of a client holding one is never closed to make room for a source
// that holds more; an idle one of the source holding the most is.
func TestPoolSparesTheFewestHeld(t *testing.T) {
	p := newPool(5, 4)
	addr := func(last byte) net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, last), Port: 1} }
	good, _, _ := p.admit(addr(1), func() {}) // idle: in its handshake
	var flood []*slot
	for range 4 {
		sl, _, _ := p.admit(addr(2), func() {})
		sl.begin()
		flood = append(flood, sl)
	}
	// A third source: the flood's source holds 4, more than its 1 would.
	sl, why, victim := p.admit(addr(3), func() {})
	require.NotNil(t, sl, why)
	require.Contains(t, flood, victim, "busy, but its source holds the most")
	require.NotEqual(t, good, victim)
	// The flood's source again (3 held, 4 with this one): the idle
	// connection of the client holding one is spared.
	sl.begin()
	_, why, victim = p.admit(addr(2), func() {})
	require.Equal(t, ReasonConnLimit, why)
	require.Nil(t, victim)
}

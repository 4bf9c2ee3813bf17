package pageload

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAnnouncedOriginsAreBounded: a server announcing thousands of
// origins (97 MB of ORIGIN frames took the loader to 669 MiB) fills a
// connection's set up to MaxAnnounced and no further, the rest counted;
// the frames' octets count against the page's bound.
func TestAnnouncedOriginsAreBounded(t *testing.T) {
	ld := &load{l: &Loader{cfg: Config{MaxPageBytes: 1 << 20}}, t0: time.Now()}
	c := &originConn{originCh: make(chan struct{})}
	info := &Conn{}
	var origins []string
	for i := range 3000 {
		origins = append(origins, fmt.Sprintf("https://o%d.example", i))
	}
	ld.announced(c, info, origins[:1000])
	ld.announced(c, info, origins[1000:])
	ld.announced(c, info, origins[:10]) // known already: not counted again
	require.Len(t, info.Announced, MaxAnnounced)
	require.Len(t, c.announced, MaxAnnounced)
	require.Equal(t, 3000-MaxAnnounced, info.AnnouncedIgnored)
	require.True(t, c.announces("o5.example", 443))
	select {
	case <-c.originCh:
	default:
		t.Fatal("the first frame is signalled")
	}
	require.NoError(t, ld.charge(1<<19))
	require.NoError(t, ld.charge(1<<19))
	require.ErrorIs(t, ld.charge(1), ErrTooLarge)
}

// TestRaceOrigin: a coalesced lookup races the connection's ORIGIN
// frames (RFC 9412). A frame announcing the host ends the race with the
// connection's own address and no query's time, and the lookup still on
// its way is cancelled; a frame announcing other origins leaves the
// lookup to answer; an origin announced before the lookup began needs no
// lookup at all; with ORIGIN off the lookup answers alone.
func TestRaceOrigin(t *testing.T) {
	remote := netip.MustParseAddrPort("192.0.2.7:443")
	dnsAddr := netip.MustParseAddr("198.51.100.9")
	type outcome struct {
		addrs []netip.Addr
		lk    *Lookup
		err   error
	}
	// race runs one race: before are the origins announced before the
	// lookup begins, during those announced while it is on its way; dns
	// says whether the lookup should answer it (then it is released once
	// the race has shown it waits for it), and looked whether a lookup
	// began at all.
	race := func(t *testing.T, origins bool, before, during []string, dns bool) (o outcome, looked bool) {
		ld := &load{l: &Loader{cfg: Config{Origins: origins, Port: 443, MaxPageBytes: 1 << 20}}, t0: time.Now()}
		c := &originConn{originCh: make(chan struct{}), remote: remote, index: 2}
		if before != nil {
			ld.announced(c, &Conn{}, before)
		}
		asked, release, cancelled := make(chan struct{}), make(chan struct{}), make(chan bool, 1)
		lookup := func(ctx context.Context) ([]netip.Addr, *Lookup, error) {
			close(asked)
			select {
			case <-release:
				cancelled <- false
				return []netip.Addr{dnsAddr}, &Lookup{Transport: "doh3", Coalesced: true, Conn: 2}, nil
			case <-ctx.Done():
				cancelled <- true
				return nil, &Lookup{Transport: "doh3"}, ctx.Err()
			}
		}
		done := make(chan outcome, 1)
		go func() {
			a, lk, err := ld.raceOrigin(context.Background(), c, "www.example", lookup)
			done <- outcome{a, lk, err}
		}()
		select {
		case <-asked:
		case o := <-done:
			return o, false
		}
		if during != nil {
			ld.announced(c, &Conn{}, during)
		}
		if !dns {
			select {
			case o = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the race waits for its lookup after the frame announced the host")
			}
			require.True(t, <-cancelled, "the lookup the frame made needless is cancelled")
			return o, true
		}
		select {
		case o := <-done:
			t.Fatalf("the race ended before its lookup answered: %+v", o)
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		o = <-done
		require.False(t, <-cancelled)
		return o, true
	}
	byOrigin := func(t *testing.T, o outcome) {
		require.NoError(t, o.err)
		require.Equal(t, []netip.Addr{remote.Addr()}, o.addrs)
		require.Equal(t, &Lookup{Transport: "origin", Coalesced: true, Conn: 2}, o.lk)
	}
	byDNS := func(t *testing.T, o outcome) {
		require.NoError(t, o.err)
		require.Equal(t, []netip.Addr{dnsAddr}, o.addrs)
		require.Equal(t, "doh3", o.lk.Transport)
	}

	t.Run("frame-wins", func(t *testing.T) {
		o, looked := race(t, true, nil, []string{"https://www.example"}, false)
		require.True(t, looked)
		byOrigin(t, o)
	})
	t.Run("frame-for-others", func(t *testing.T) {
		o, looked := race(t, true, nil, []string{"https://cdn.example", "https://www.example:8443"}, true)
		require.True(t, looked)
		byDNS(t, o)
	})
	t.Run("announced-before", func(t *testing.T) {
		o, looked := race(t, true, []string{"https://www.example"}, nil, false)
		require.False(t, looked, "no lookup for an origin already announced")
		byOrigin(t, o)
	})
	t.Run("no-frame", func(t *testing.T) {
		o, looked := race(t, true, nil, nil, true)
		require.True(t, looked)
		byDNS(t, o)
	})
	t.Run("origins-off", func(t *testing.T) {
		o, looked := race(t, false, []string{"https://www.example"}, nil, true)
		require.True(t, looked)
		byDNS(t, o)
	})
}

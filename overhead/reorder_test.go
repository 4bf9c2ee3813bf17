package overhead_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/overhead"
)

// TestLossAndReorderingChangeNoLabel: a capture where the network lost,
// retransmitted, reordered or duplicated packets (a capture point past a
// lossy link sees a segment after the ones that followed it; one before
// it sees the segment twice) gives every packet the layers the same
// packet had in the clean capture, adds up exactly, and decrypts every
// connection. What a packet carries decides its layers, not when it
// came. Each DNS octet over a stream is fresh once, in the first packet
// that carried it, so the packets that ask something new are the clean
// capture's (a TCP tail-loss probe on a busy host resends a query, and
// counting it twice made one resolution two).
func TestLossAndReorderingChangeNoLabel(t *testing.T) {
	raws, _ := fixture(t)
	kl := keyLog(t)
	server := netip.MustParseAddr("10.200.0.2")
	base, err := overhead.Attribute(slices.Clone(raws), server, overhead.DefaultApps, kl)
	require.NoError(t, err)
	want := layersByPacket(t, base, raws)

	for seed := range testutil.Seeds(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			mangled, moved, doubled := mangle(raws, seed)
			require.Positive(t, moved+doubled, "the seed changes the capture")
			conns, err := overhead.Attribute(slices.Clone(mangled), server, overhead.DefaultApps, kl)
			require.NoError(t, err)
			require.Len(t, conns, len(base), "the same connections")
			var total, sum int64
			for _, r := range mangled {
				total += int64(len(r.Data))
			}
			for i, c := range conns {
				require.Equal(t, base[i].Decrypted, c.Decrypted, "%s %v", c.App, c.Server)
				if c.Proto == "udp" && c.App == "dns" {
					continue // a datagram resent is asked anew: each its own
				}
				wantAsks, wantOctets := fresh(base[i])
				asks, octets := fresh(c)
				require.Equal(t, wantAsks, asks, "%s %v: packets asking anew", c.App, c.Client)
				require.Equal(t, wantOctets, octets, "%s %v: each DNS octet fresh once", c.App, c.Client)
				require.Equal(t, base[i].SNI, c.SNI, c.App)
				up, down, _, _ := c.Totals()
				sum += up.Total() + down.Total()
			}
			require.Equal(t, total, sum, "every captured octet attributed once")
			got := layersByPacket(t, conns, mangled)
			for data, layers := range got {
				require.Equal(t, want[data], layers, "a %d-octet packet (%d moved, %d doubled)", len(data), moved, doubled)
			}
		})
	}
}

// fresh counts a connection's packets from the client with fresh DNS
// octets, and its fresh DNS octets both ways.
func fresh(c *overhead.Conn) (asks int, octets int64) {
	for _, p := range c.Packets {
		if p.FromClient && p.FreshDNS > 0 {
			asks++
		}
		octets += p.FreshDNS
	}
	return asks, octets
}

func keyLog(t *testing.T) overhead.KeyLog {
	f, err := os.Open("testdata/keys.log")
	require.NoError(t, err)
	defer f.Close()
	kl, err := overhead.ReadKeyLog(f)
	require.NoError(t, err)
	return kl
}

// layersByPacket maps each captured packet's octets to its layers, the
// packets taken in the order Attribute keeps them (by time, stably).
func layersByPacket(t *testing.T, conns []*overhead.Conn, raws []overhead.Raw) map[string]overhead.Counts {
	t.Helper()
	byTime := map[time.Time][]*overhead.Packet{}
	for _, c := range conns {
		for _, p := range c.Packets {
			byTime[p.Time] = append(byTime[p.Time], p)
		}
	}
	out := map[string]overhead.Counts{}
	for _, r := range raws {
		ps := byTime[r.Time]
		i := slices.IndexFunc(ps, func(p *overhead.Packet) bool { return p.Len == len(r.Data) })
		if i < 0 {
			continue // not the server's
		}
		p := ps[i]
		byTime[r.Time] = slices.Delete(ps, i, i+1)
		if prev, ok := out[string(r.Data)]; ok {
			require.Equal(t, prev, p.Layers, "one packet's copies, labelled alike")
		}
		out[string(r.Data)] = p.Layers
	}
	return out
}

// mangle moves some packets of the capture after later ones of their
// direction (lost, then retransmitted: the capture point past the loss
// sees them late) and repeats some later (the point before it sees the
// original and the retransmission). The first packet of each direction
// (a SYN, or a QUIC client's first Initial) stays first: a capture that
// starts mid-handshake is another test's. Times stay distinct, so the
// order by time is the order made here.
func mangle(raws []overhead.Raw, seed uint64) (out []overhead.Raw, moved, doubled int) {
	rng := rand.New(rand.NewPCG(seed, 53))
	sorted := slices.Clone(raws)
	slices.SortStableFunc(sorted, func(a, b overhead.Raw) int { return a.Time.Compare(b.Time) })
	seen := map[string]bool{}
	type late struct {
		raw   overhead.Raw
		after int // how many packets to let by
	}
	var held []late
	for _, r := range sorted {
		ihl := int(r.Data[0]&0x0f) * 4
		flow := string(r.Data[12:20]) + string(r.Data[ihl:ihl+4]) // addresses and ports
		first := !seen[flow]
		seen[flow] = true
		switch x := rng.IntN(10); {
		case first || len(r.Data) <= 60: // a handshake's first packet, or a bare ACK
			out = append(out, r)
		case x < 2:
			held = append(held, late{r, 1 + rng.IntN(3)})
			moved++
			continue
		case x < 3:
			out = append(out, r)
			held = append(held, late{r, 1 + rng.IntN(3)})
			doubled++
		default:
			out = append(out, r)
		}
		var still []late
		for _, h := range held {
			if h.after--; h.after > 0 {
				still = append(still, h)
				continue
			}
			out = append(out, h.raw)
		}
		held = still
	}
	for _, h := range held {
		out = append(out, h.raw)
	}
	t0 := sorted[0].Time
	for i := range out {
		out[i].Time = t0.Add(time.Duration(i) * time.Microsecond)
	}
	return out, moved, doubled
}

// TestReusedPortIsANewConnection: a client that reuses its UDP port for
// a new QUIC connection (new connection IDs) after the last one's
// short-header packets starts a connection of its own, decrypted with
// its own keys; the late Initials of TestLossAndReorderingChangeNoLabel
// carry the old connection's IDs and do not.
func TestReusedPortIsANewConnection(t *testing.T) {
	raws, _ := fixture(t)
	server := netip.MustParseAddr("10.200.0.2")
	conns, err := overhead.Attribute(slices.Clone(raws), server, overhead.DefaultApps, keyLog(t))
	require.NoError(t, err)
	var doq, doh3 *overhead.Conn
	for _, c := range conns {
		switch c.App {
		case "doq":
			doq = c
		case "doh3":
			doh3 = c
		}
	}
	require.NotNil(t, doq)
	require.NotNil(t, doh3)
	// The DoH/3 connection again, a second after the DoQ one, from the
	// DoQ connection's client port to its server port.
	last := raws[0].Time
	for _, r := range raws {
		if r.Time.After(last) {
			last = r.Time
		}
	}
	var again []overhead.Raw
	for _, r := range raws {
		ihl := int(r.Data[0]&0x0f) * 4
		if r.Data[9] != 17 {
			continue
		}
		src, dst := int(r.Data[ihl])<<8|int(r.Data[ihl+1]), int(r.Data[ihl+2])<<8|int(r.Data[ihl+3])
		var from, to uint16
		switch {
		case src == int(doh3.Client.Port()) && dst == 443:
			from, to = doq.Client.Port(), 853
		case dst == int(doh3.Client.Port()) && src == 443:
			from, to = 853, doq.Client.Port()
		default:
			continue
		}
		d := slices.Clone(r.Data)
		d[ihl], d[ihl+1], d[ihl+2], d[ihl+3] = byte(from>>8), byte(from), byte(to>>8), byte(to)
		again = append(again, overhead.Raw{Time: last.Add(time.Second + r.Time.Sub(raws[0].Time)), Data: d})
	}
	require.Len(t, again, len(doh3.Packets))
	conns, err = overhead.Attribute(append(slices.Clone(raws), again...), server, overhead.DefaultApps, keyLog(t))
	require.NoError(t, err)
	var same []*overhead.Conn
	for _, c := range conns {
		if c.Proto == "udp" && c.Client == doq.Client {
			same = append(same, c)
		}
	}
	require.Len(t, same, 2, "the first connection and the one that reused its port")
	require.Len(t, same[0].Packets, len(doq.Packets))
	require.Len(t, same[1].Packets, len(doh3.Packets))
	require.True(t, same[0].Decrypted && same[1].Decrypted, "each with its own keys")
}

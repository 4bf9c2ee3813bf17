package overhead_test

import (
	"bytes"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/overhead"
)

// The fixture is a testbed link capture of one query for example.org over
// DoT, DoH/1.1, DoH/2, DoH/3 and DoQ, each on a new connection, with the
// client's key log (doxlab experiment overhead --keep, X25519 key share).
func fixture(t *testing.T) ([]overhead.Raw, int64) {
	var raws []overhead.Raw
	var total int64
	for _, f := range []string{"testdata/client-up.pcap", "testdata/client-down.pcap"} {
		r, err := overhead.ReadPcap(f)
		require.NoError(t, err)
		for _, p := range r {
			total += int64(len(p.Data))
		}
		raws = append(raws, r...)
	}
	return raws, total
}

func TestAttributionAddsUpExactly(t *testing.T) {
	raws, total := fixture(t)
	f, err := os.Open("testdata/keys.log")
	require.NoError(t, err)
	defer f.Close()
	kl, err := overhead.ReadKeyLog(f)
	require.NoError(t, err)
	conns, err := overhead.Attribute(raws, netip.MustParseAddr("10.200.0.2"), overhead.DefaultApps, kl)
	require.NoError(t, err)
	var sum overhead.Counts
	n := 0
	for _, c := range conns {
		up, down, _, _ := c.Totals()
		sum.Add(up)
		sum.Add(down)
		if c.Proto != "tcp" && c.Proto != "udp" {
			require.Equal(t, "icmp", c.App, "a port unreachable after a close")
			continue
		}
		n++
		require.True(t, c.Decrypted, "%s %v", c.App, c.Server)
		var all overhead.Counts
		all.Add(up)
		all.Add(down)
		require.Zero(t, all[overhead.Undecrypted], c.App)
		require.EqualValues(t, 471, all[overhead.Certificates], "%s: the certificate message, once", c.App)
		dns := map[string]int64{"dot": 89, "doq": 89, "doh": 85, "doh3": 85} // DoT and DoQ add a 2-octet prefix each way
		require.Equal(t, dns[c.App], all[overhead.DNS], c.App)
		asks, fresh := fresh(c)
		require.Equal(t, 1, asks, "%s: one packet asked", c.App)
		require.Equal(t, dns[c.App], fresh, "%s: every DNS octet fresh once", c.App)
		switch c.App {
		case "doh", "doh3":
			require.Positive(t, all[overhead.HTTPHeaders], c.App)
		case "dot", "doq":
			require.Zero(t, all[overhead.HTTPHeaders]+all[overhead.HTTPMgmt], c.App)
		}
		if c.Proto == "udp" {
			require.Positive(t, all[overhead.QUIC])
			require.Zero(t, all[overhead.TLS], "QUIC has no TLS records")
			// One query, on the client's first bidirectional stream: its
			// request leaves before its answer's last octet arrives.
			require.Len(t, c.Streams, 1, c.App)
			st := c.Streams[0]
			require.Zero(t, st.ID)
			require.True(t, st.Request.After(c.Packets[0].Time) && st.Last.After(st.Request), "%s: %v", c.App, st)
			require.Positive(t, st.Octets, "%s: the answer", c.App)
		}
	}
	require.Equal(t, 5, n, "DoT, DoH/1.1, DoH/2, DoH/3, DoQ")
	require.Equal(t, total, sum.Total(), "every captured octet is attributed once")
}

func TestWithoutKeysNothingIsLost(t *testing.T) {
	raws, total := fixture(t)
	conns, err := overhead.Attribute(raws, netip.MustParseAddr("10.200.0.2"), overhead.DefaultApps, overhead.KeyLog{})
	require.NoError(t, err)
	var sum overhead.Counts
	for _, c := range conns {
		up, down, _, _ := c.Totals()
		sum.Add(up)
		sum.Add(down)
	}
	require.Equal(t, total, sum.Total())
	require.Positive(t, sum[overhead.Undecrypted])
	require.Zero(t, sum[overhead.DNS])
}

// FuzzAttribute feeds arbitrary packets to the parsers with the fixture's
// keys: no panic, and the layers always add up.
func FuzzAttribute(f *testing.F) {
	raws, _ := fixture(&testing.T{})
	for _, r := range raws[:min(len(raws), 20)] {
		f.Add(r.Data)
	}
	kf, _ := os.ReadFile("testdata/keys.log")
	kl, _ := overhead.ReadKeyLog(bytesReader(kf))
	server := netip.MustParseAddr("10.200.0.2")
	f.Fuzz(func(t *testing.T, b []byte) {
		// Prefix the fixture's first packets so the fuzzed one lands in a
		// connection whose keys are known.
		in := append(append([]overhead.Raw{}, raws[:min(len(raws), 6)]...), overhead.Raw{Data: b})
		overhead.Attribute(in, server, overhead.DefaultApps, kl) // an error is fine; a panic or a wrong sum is not
	})
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// TestDefaultAppsFromTheTable: the standard ports' applications, now
// read from the protocol table, are what they were.
func TestDefaultAppsFromTheTable(t *testing.T) {
	for _, c := range []struct {
		proto string
		port  uint16
		want  string
	}{{"udp", 53, "dns"}, {"tcp", 53, "dns"}, {"tcp", 853, "dot"}, {"udp", 853, "doq"}, {"tcp", 443, "doh"}, {"udp", 443, "doh3"}, {"tcp", 8080, "dns"}} {
		require.Equal(t, c.want, overhead.DefaultApps(c.proto, c.port), "%s/%d", c.proto, c.port)
	}
}

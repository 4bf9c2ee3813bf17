//go:build linux

package confine_test

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser/confine"
	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/testutil"
)

// canary counts what reaches an address it listens on.
type canary struct {
	name string
	hits atomic.Int32
	from atomic.Value // the last sender's address
}

func listenTCP(t *testing.T, ns *testutil.Netns, addr string) *canary {
	c := &canary{name: "tcp " + addr}
	var l net.Listener
	require.NoError(t, ns.Run(func() (err error) { l, err = net.Listen("tcp", addr); return err }))
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.from.Store(conn.RemoteAddr().(*net.TCPAddr).IP.String())
			c.hits.Add(1)
			conn.Close()
		}
	}()
	return c
}

func listenUDP(t *testing.T, ns *testutil.Netns, addr string) *canary {
	c := &canary{name: "udp " + addr}
	var pc net.PacketConn
	require.NoError(t, ns.Run(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }))
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			c.hits.Add(1)
		}
	}()
	return c
}

// TestConfinedNetwork puts a browser's network in a vantage point of the
// test's own, beside an "Internet" host that also holds a private
// network and a metadata service, and checks from inside the browser's
// namespace that only the public host and the stub's port are reached,
// that every other try is refused at once and recorded, that an opt-in
// opens a private block but never the vantage point's own addresses,
// and that Close leaves the vantage point as it was.
func TestConfinedNetwork(t *testing.T) {
	testutil.NeedRoot(t, "the test makes network namespaces and firewall rules")
	testutil.Need(t, "nft", "apt-get install nftables")
	vantage := testutil.NewNetns(t, "dxt-vantage")
	inet := testutil.NewNetns(t, "dxt-inet")
	vantage.Link(inet, "up0", "198.51.100.1/24", "eth0", "198.51.100.10/24")
	// The "Internet" host also holds a private network's host and a
	// metadata service, which the vantage point routes to.
	inet.IP("-n", inet.Name, "addr", "add", "10.77.0.5/32", "dev", "lo")
	inet.IP("-n", inet.Name, "addr", "add", "169.254.169.254/32", "dev", "lo")
	vantage.IP("-n", vantage.Name, "route", "add", "10.77.0.0/24", "via", "198.51.100.10")
	vantage.IP("-n", vantage.Name, "route", "add", "169.254.169.254/32", "via", "198.51.100.10")

	public := listenTCP(t, inet, "198.51.100.10:80")
	canaries := []*canary{
		listenTCP(t, vantage, "127.0.0.1:8081"),
		listenTCP(t, vantage, "0.0.0.0:5432"), // reached as the vantage point's own 198.51.100.1
		listenUDP(t, vantage, "127.0.0.1:443"),
		listenTCP(t, inet, "10.77.0.5:80"),
		listenTCP(t, inet, "169.254.169.254:80"),
	}
	var c *confine.Net
	allow := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	require.NoError(t, vantage.Run(func() (err error) {
		c, err = confine.New(&blocklist.Policy{Allow: allow})
		return err
	}))
	stub := listenTCP(t, vantage, c.Stub.String()+":53")

	dial := func(network, addr string) error {
		return testutil.InNetns(c.NS, func() error {
			conn, err := net.DialTimeout(network, addr, 2*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			if network == "udp" {
				conn.Write([]byte("x"))
				conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				_, err = conn.Read(make([]byte, 1)) // the refusal comes back as an error
			}
			return err
		})
	}
	require.NoError(t, dial("tcp", "198.51.100.10:80"), "the public host")
	require.NoError(t, dial("tcp", c.Stub.String()+":53"), "the stub's port")
	for _, d := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:8081"}, {"tcp", "198.51.100.1:5432"}, {"udp", "127.0.0.1:443"},
		{"tcp", "10.77.0.5:80"}, {"tcp", "169.254.169.254:80"}, {"tcp", c.Stub.String() + ":22"}, {"tcp", "[::1]:8081"},
	} {
		start := time.Now()
		err := dial(d.network, d.addr)
		require.Error(t, err, "%s %s", d.network, d.addr)
		require.Less(t, time.Since(start), testutil.Scaled(time.Second), "%s %s: refused at once, not left to time out", d.network, d.addr)
	}
	require.Eventually(t, func() bool { return public.hits.Load() == 1 && stub.hits.Load() == 1 }, 2*time.Second, 10*time.Millisecond)
	require.Equal(t, "198.51.100.1", public.from.Load(), "the browser's traffic leaves with the vantage point's address")
	refused, packets, err := c.Refused()
	require.NoError(t, err)
	var got []string
	for _, r := range refused {
		got = append(got, r.Addr+" "+r.Proto+" "+strconv.Itoa(r.Port))
	}
	require.ElementsMatch(t, []string{"127.0.0.1 tcp 8081", "198.51.100.1 tcp 5432", "127.0.0.1 udp 443", "10.77.0.5 tcp 80",
		"169.254.169.254 tcp 80", c.Stub.String() + " tcp 22", "::1 tcp 8081"}, got)
	require.GreaterOrEqual(t, packets, len(got))
	again, _, err := c.Refused()
	require.NoError(t, err)
	require.Empty(t, again, "read once, then cleared")

	// Opting into the private network opens it, and nothing else.
	require.NoError(t, vantage.Run(func() error {
		return c.SetPolicy(&blocklist.Policy{Allow: append(allow, netip.MustParsePrefix("10.77.0.0/24"))})
	}))
	require.NoError(t, dial("tcp", "10.77.0.5:80"), "opted in")
	require.Error(t, dial("tcp", "169.254.169.254:80"))
	// The blocklist wins over an opt-in.
	block, err := blocklist.FromPrefixes([]string{"10.77.0.5"}, "test")
	require.NoError(t, err)
	require.NoError(t, vantage.Run(func() error {
		return c.SetPolicy(&blocklist.Policy{Block: block, Allow: append(allow, netip.MustParsePrefix("10.77.0.0/24"))})
	}))
	require.Error(t, dial("tcp", "10.77.0.5:80"), "blocklisted though allowed")
	// A lab that opts into every address (its testbed in RFC 2544's
	// 198.18.0.0/15, say) opens no port of the vantage point's own: the
	// stub's address is the vantage point's, and only its port 53 is
	// the browser's. Each is refused at once and said to be (the
	// vantage point's side dropped the stub's other ports unsaid, and
	// the page waited out its connect); the canaries count none.
	_, _, err = c.Refused()
	require.NoError(t, err)
	require.NoError(t, vantage.Run(func() error {
		return c.SetPolicy(&blocklist.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
	}))
	require.NoError(t, dial("tcp", c.Stub.String()+":53"), "the stub's port")
	for _, addr := range []string{c.Stub.String() + ":5432", c.Stub.String() + ":22", "198.51.100.1:5432"} {
		start := time.Now()
		require.Error(t, dial("tcp", addr), "%s: the vantage point itself, though every address is allowed", addr)
		require.Less(t, time.Since(start), testutil.Scaled(time.Second), "%s: refused at once", addr)
	}
	refused, _, err = c.Refused()
	require.NoError(t, err)
	require.Len(t, refused, 3, "%v", refused)
	for _, cn := range canaries {
		want := int32(0)
		if cn.name == "tcp 10.77.0.5:80" {
			want = 1 // the opted-in connection
		}
		require.Equal(t, want, cn.hits.Load(), cn.name)
	}

	require.NoError(t, vantage.Run(c.Close))
	_, err = os.Stat("/run/netns/" + c.NS)
	require.ErrorIs(t, err, os.ErrNotExist, "the namespace is gone")
	out, err := vantage.Command("nft", "list", "tables").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "no table left in the vantage point")
	fwd, err := vantage.Command("cat", "/proc/sys/net/ipv4/ip_forward").Output()
	require.NoError(t, err)
	require.Equal(t, "0", strings.TrimSpace(string(fwd)), "forwarding off again")
}

package experiment_test

import (
	"context"
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/testbed"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// loopbackNet starts a loopback net the way an experiment does.
func loopbackNet(t *testing.T, spec testbed.Spec) experiment.Net {
	t.Helper()
	env := &experiment.Env{Store: t.TempDir() + "/x.db", Net: experiment.NetLoopback}
	st, n, done, err := env.Start(context.Background(), spec)
	require.NoError(t, err)
	st.Close()
	t.Cleanup(done)
	return n
}

// TestLoopbackNet: hosts on a /24 of the net's own, the client on
// 127.0.0.1 (what the kernel dials from); a second net of the same name
// takes the next /24 while the first is open, and the first's again
// once it is closed; profiles that shape nothing are taken and others
// refused with ErrNeedsTestbed; the link check measures nothing, a
// distance shapes nothing; only its own hosts run; a net of another
// name is refused.
func TestLoopbackNet(t *testing.T) {
	spec := testbed.Spec{Name: "nettest", Hosts: []string{"client", "server", "proxy"}}
	a := loopbackNet(t, spec)
	require.Equal(t, experiment.NetLoopback, a.Kind())
	require.Equal(t, "127.0.0.1", a.IP("client"))
	prefix := strings.TrimSuffix(a.IP("server"), "2")
	require.True(t, strings.HasPrefix(prefix, "127.1"), a.IP("server"))
	require.Equal(t, prefix+"3", a.IP("proxy"))
	require.Equal(t, prefix+"129", a.Local("client"))
	require.Empty(t, a.NetNS("client"))

	env := &experiment.Env{Store: t.TempDir() + "/y.db", Net: experiment.NetLoopback}
	st, b, done, err := env.Start(context.Background(), spec)
	require.NoError(t, err)
	st.Close()
	require.NotEqual(t, a.IP("server"), b.IP("server"), "a second net, while the first is open")
	done()
	c := loopbackNet(t, spec)
	require.NotEqual(t, a.IP("server"), c.IP("server"))
	require.Equal(t, b.IP("server"), c.IP("server"), "the closed net's /24 is free again")

	none, err := testbed.LookupProfile("none")
	require.NoError(t, err)
	require.NoError(t, a.SetProfile("client", none))
	fiber, err := testbed.LookupProfile("fiber")
	require.NoError(t, err)
	require.ErrorIs(t, a.SetProfile("client", fiber), experiment.ErrNeedsTestbed)
	require.ErrorContains(t, a.SetProfile("nobody", none), `no host "nobody"`)
	_, err = a.Check(context.Background(), fiber, testbed.CheckOptions{})
	require.ErrorIs(t, err, experiment.ErrNeedsTestbed)
	res, err := a.Check(context.Background(), none, testbed.CheckOptions{})
	require.NoError(t, err)
	require.Zero(t, res.ErrP99)
	require.Error(t, a.Command("nobody", "true").Run())
	require.NoError(t, a.Command("client", "true").Run())
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, experiment.OwnBlock(a, "server"), "the block a page loader opens to the net's pages")
	require.Empty(t, experiment.OwnBlock(a, "nobody"))

	// A distance is no link's on loopback: nothing shaped, and said.
	d, err := experiment.SetDistance(a, "proxy", 40*time.Millisecond)
	require.NoError(t, err)
	require.Zero(t, d, "the proxy is as near as every host")
	ran := false
	require.NoError(t, a.Run("server", func() error { ran = true; return nil }))
	require.True(t, ran)
	require.ErrorContains(t, a.Run("nobody", func() error { return nil }), `no host "nobody" on the loopback net`)
	// A net that is neither is refused.
	env = &experiment.Env{Store: t.TempDir() + "/z.db", Net: "docker"}
	_, _, _, err = env.Start(context.Background(), spec)
	require.ErrorContains(t, err, `net "docker" is not testbed or loopback`)
}

// pingPong has the client send "ping" to the server, the server answer
// "pong", the client send an empty datagram, and the machine send itself
// some noise on its own loopback address, outside the net.
func pingPong(t *testing.T, n experiment.Net) {
	t.Helper()
	srv, err := net.ListenPacket("udp", net.JoinHostPort(n.IP("server"), "53"))
	require.NoError(t, err)
	defer srv.Close()
	other, err := net.ListenPacket("udp", "127.0.0.1:0") // the machine's own, not the net's
	require.NoError(t, err)
	defer other.Close()
	c, err := net.Dial("udp", srv.LocalAddr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 16)
	require.NoError(t, srv.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, from, err := srv.ReadFrom(buf)
	require.NoError(t, err)
	_, err = srv.WriteTo([]byte("pong"), from)
	require.NoError(t, err)
	_, err = c.Write(nil)
	require.NoError(t, err)
	_, err = other.WriteTo([]byte("noise"), other.LocalAddr())
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
}

// TestLoopbackSniffKeepsItsHosts: a host's capture on the loopback net
// holds its packets with the net's other hosts, each once, both ways,
// and none of the machine's other loopback traffic.
func TestLoopbackSniffKeepsItsHosts(t *testing.T) {
	n := loopbackNet(t, testbed.Spec{Name: "sniff"})
	sn, err := n.Sniff("client")
	require.NoError(t, err)
	pingPong(t, n)
	pkts, err := sn.Stop()
	require.NoError(t, err)
	var payloads []string
	for _, p := range pkts {
		payloads = append(payloads, string(p.Data[28:]))
	}
	require.Equal(t, []string{"ping", "pong", ""}, payloads, "the net's packets, each once, in order")
}

// TestLoopbackPcapKeepsEachHostsLink: --pcap on the loopback net writes
// each host's link as the testbed does, HOST-up.pcap (what it sent the
// net's other hosts) and HOST-down.pcap (what they sent it), which
// tshark reads with the packets' times; the machine's own loopback
// traffic is in none of them.
func TestLoopbackPcapKeepsEachHostsLink(t *testing.T) {
	tshark := testutil.Need(t, "tshark", "apt-get install tshark")
	dir := t.TempDir()
	env := &experiment.Env{Store: dir + "/x.db", Net: experiment.NetLoopback}
	st, n, done, err := env.Start(context.Background(), testbed.Spec{Name: "pcap", Hosts: []string{"client", "server", "proxy"}, PcapDir: dir + "/pcap"})
	require.NoError(t, err)
	st.Close()
	closed := false
	defer func() {
		if !closed {
			done()
		}
	}()
	pingPong(t, n)
	done()
	closed = true

	read := func(file string) []string {
		t.Helper()
		out, err := exec.Command(tshark, "-r", dir+"/pcap/"+file, "-T", "fields", "-e", "ip.src", "-e", "ip.dst", "-e", "udp.payload").Output()
		require.NoError(t, err, file)
		return strings.Fields(string(out))
	}
	client, server := n.IP("client"), n.IP("server")
	ping, pong := hex.EncodeToString([]byte("ping")), hex.EncodeToString([]byte("pong"))
	require.Equal(t, []string{client, server, ping, client, server}, read("client-up.pcap"), "ping, and an empty datagram")
	require.Equal(t, []string{server, client, pong}, read("client-down.pcap"))
	require.Equal(t, []string{server, client, pong}, read("server-up.pcap"))
	require.Equal(t, []string{client, server, ping, client, server}, read("server-down.pcap"))
	require.Empty(t, read("proxy-up.pcap"), "a host that sent nothing has an empty capture")
	require.Empty(t, read("proxy-down.pcap"))
	out, err := exec.Command(tshark, "-r", dir+"/pcap/client-up.pcap", "-T", "fields", "-e", "frame.time_epoch").Output()
	require.NoError(t, err)
	sec, err := strconv.ParseFloat(strings.Fields(string(out))[0], 64)
	require.NoError(t, err)
	require.InDelta(t, float64(time.Now().Unix()), sec, 60, "the packet's own time")
}

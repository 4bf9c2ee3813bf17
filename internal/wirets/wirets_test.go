//go:build linux

package wirets_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/internal/wirets"
)

// TestTimestampsOfALoopbackDatagram: a datagram sent with TXRequest has
// a transmit timestamp on the sender's error queue and a receive one in
// the receiver's control messages, both from the kernel's clock: the send
// happened before the receipt, and both between the call before the send
// and the read after it.
func TestTimestampsOfALoopbackDatagram(t *testing.T) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer rx.Close()
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	require.NoError(t, err)
	defer tx.Close()
	for _, c := range []*net.UDPConn{rx, tx} {
		raw, err := c.SyscallConn()
		require.NoError(t, err)
		require.NoError(t, wirets.Enable(raw))
	}
	// The kernel turns receive timestamps on for the whole stack
	// asynchronously when the first socket asks (net_enable_timestamp
	// defers its static key): with no other socket asking already, the
	// first datagram can arrive untimestamped. A few tries, then it must.
	var before, after, sent, got time.Time
	var raw syscall.RawConn
	buf, oob := make([]byte, 16), make([]byte, wirets.OOBSize)
	for try := 0; ; try++ {
		before = time.Now()
		_, _, err = tx.WriteMsgUDP([]byte("ping"), wirets.TXRequest(), nil)
		require.NoError(t, err)
		raw, err = tx.SyscallConn()
		require.NoError(t, err)
		var ok bool
		sent, ok = wirets.TX(raw, time.Second)
		require.True(t, ok, "a transmit timestamp on the error queue")
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
		require.NoError(t, err)
		after = time.Now()
		require.Equal(t, "ping", string(buf[:n]))
		if got, ok = wirets.RX(oob[:oobn]); ok {
			break
		}
		require.Less(t, try, 4, "a receive timestamp in the control messages")
		time.Sleep(20 * time.Millisecond)
	}

	require.False(t, got.Before(sent), "received %v before sent %v", got, sent)
	require.False(t, sent.Before(before.Add(-time.Millisecond)), "sent before the call")
	require.False(t, got.After(after), "received after it was read")

	_, ok := wirets.RX([]byte{1, 2, 3})
	require.False(t, ok, "no timestamp in garbage")
	_, ok = wirets.TX(raw, time.Millisecond)
	require.False(t, ok, "the queue is drained: nothing more to read")
}

// TestALateTimestampIsNotTheNextSends: a datagram held in a qdisc (a
// token bucket) is stamped when it leaves, after its sender stopped
// waiting; a later send that asks for its own timestamp and is held too
// would read that one from the error queue, some 200 ms older than
// itself, unless it drains the queue first, as the transports do.
func TestALateTimestampIsNotTheNextSends(t *testing.T) {
	testutil.NeedRoot(t, "the test shapes a veth in a namespace of its own")
	ns := testutil.NewNetns(t, "dxt-wirets")
	ns.IP("-n", ns.Name, "link", "add", "va", "type", "veth", "peer", "name", "vb")
	ns.IP("-n", ns.Name, "addr", "add", "10.9.0.1/24", "dev", "va")
	ns.IP("-n", ns.Name, "link", "set", "va", "up")
	ns.IP("-n", ns.Name, "link", "set", "vb", "up")
	ns.IP("-n", ns.Name, "neigh", "add", "10.9.0.2", "lladdr", "02:00:00:00:00:02", "dev", "va")
	out, err := ns.Command("tc", "qdisc", "add", "dev", "va", "root", "tbf", "rate", "100kbit", "burst", "1600", "latency", "1s").CombinedOutput()
	require.NoError(t, err, "%s", out)

	for _, drain := range []bool{false, true} {
		var stale, sent time.Time
		var late bool
		require.NoError(t, ns.Run(func() error {
			c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(10, 9, 0, 2), Port: 9})
			if err != nil {
				return err
			}
			defer c.Close()
			raw, err := c.SyscallConn()
			if err != nil {
				return err
			}
			if err := wirets.Enable(raw); err != nil {
				return err
			}
			send := func(n int, tx bool) {
				var oob []byte
				if tx {
					if drain {
						wirets.Drain(raw)
					}
					oob = wirets.TXRequest()
				}
				_, _, err := c.WriteMsgUDP(make([]byte, n), oob, nil)
				require.NoError(t, err)
			}
			time.Sleep(200 * time.Millisecond) // the bucket full
			send(1400, false)                  // the bucket emptied
			send(1200, true)                   // held some 100 ms
			_, ok := wirets.TX(raw, time.Millisecond)
			require.False(t, ok, "the datagram is held: no timestamp yet")
			time.Sleep(300 * time.Millisecond)
			send(1400, false) // the bucket emptied again
			sent = time.Now()
			send(1200, true) // held too
			stale, late = wirets.TX(raw, time.Millisecond)
			return nil
		}))
		if !drain {
			require.True(t, late && stale.Before(sent), "without draining, the held datagram's timestamp passes for the next send's")
			continue
		}
		require.False(t, late && stale.Before(sent), "drained: never an earlier send's timestamp (%v before the send)", sent.Sub(stale))
	}
}

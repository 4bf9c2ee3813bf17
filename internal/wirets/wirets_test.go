//go:build linux

package wirets_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

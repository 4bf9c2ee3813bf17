package bench

import (
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"
)

// TestPollConnReadsAsTheSocketWould: polling or sleeping, a pollConn
// gives the bytes as they come, io.EOF after a FIN and the socket's
// error after a reset.
func TestPollConnReadsAsTheSocketWould(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	reset := make(chan bool, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello"))
			time.Sleep(20 * time.Millisecond) // past the polls: the read sleeps
			c.Write([]byte("world"))
			if <-reset {
				c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
		}
	}()
	var busy atomic.Bool
	for _, rst := range []bool{false, true} {
		busy.Store(!busy.Load())
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		pc := pollWhile(c, busy.Load)
		require.IsType(t, &pollConn{}, pc)
		reset <- rst
		got := make([]byte, 10)
		_, err = io.ReadFull(pc, got)
		require.NoError(t, err)
		require.Equal(t, "helloworld", string(got))
		_, err = pc.Read(got)
		if rst {
			require.ErrorIs(t, err, syscall.ECONNRESET)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
			require.Equal(t, "read", op.Op)
		} else {
			require.ErrorIs(t, err, io.EOF)
		}
		pc.Close()
		_, err = pc.Read(got)
		require.ErrorIs(t, err, net.ErrClosed)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	require.Equal(t, a, pollWhile(a, busy.Load), "not a TCP connection: unchanged")
}

// TestPollUDPReadsBatches: x/net's batch reads go through the polling
// RawConn and get what came, whether it was there already (polled) or
// came later (after the polls, asleep).
func TestPollUDPReadsBatches(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer srv.Close()
	c, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	require.NoError(t, err)
	defer c.Close()
	pc := pollWhile(c, func() bool { return true })
	require.IsType(t, &pollUDPConn{}, pc)
	batch := ipv4.NewPacketConn(pc.(net.PacketConn))
	msgs := []ipv4.Message{{Buffers: [][]byte{make([]byte, 64)}}, {Buffers: [][]byte{make([]byte, 64)}}}
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		go func() {
			time.Sleep(delay)
			srv.WriteToUDP([]byte("answer"), c.LocalAddr().(*net.UDPAddr))
		}()
		n, err := batch.ReadBatch(msgs, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, "answer", string(msgs[0].Buffers[0][:msgs[0].N]))
	}
}

package transport

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// meter counts bytes and datagrams at the socket boundary and remembers when
// the first write after a mark happened: that is when the query left.
type meter struct {
	bytesOut, bytesIn atomic.Int64
	pktsOut, pktsIn   atomic.Int64

	mu         sync.Mutex
	armed      bool
	firstWrite time.Time
}

// arm starts watching for the next write; firstWriteSince returns it.
func (m *meter) arm() {
	m.mu.Lock()
	m.armed, m.firstWrite = true, time.Time{}
	m.mu.Unlock()
}

func (m *meter) wrote(n int) {
	m.bytesOut.Add(int64(n))
	m.pktsOut.Add(1)
	m.mu.Lock()
	if m.armed {
		m.firstWrite, m.armed = time.Now(), false
	}
	m.mu.Unlock()
}

func (m *meter) read(n int) {
	m.bytesIn.Add(int64(n))
	m.pktsIn.Add(1)
}

// firstWriteAfterArm is the time of the first write since arm, or zero.
func (m *meter) firstWriteAfterArm() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.firstWrite
}

type snapshot struct{ bytes, pkts Counts }

func (m *meter) snap() snapshot {
	return snapshot{
		bytes: Counts{Sent: m.bytesOut.Load(), Received: m.bytesIn.Load()},
		pkts:  Counts{Sent: m.pktsOut.Load(), Received: m.pktsIn.Load()},
	}
}

func (s snapshot) since(prev snapshot) snapshot {
	return snapshot{
		bytes: Counts{Sent: s.bytes.Sent - prev.bytes.Sent, Received: s.bytes.Received - prev.bytes.Received},
		pkts:  Counts{Sent: s.pkts.Sent - prev.pkts.Sent, Received: s.pkts.Received - prev.pkts.Received},
	}
}

// meteredConn is a stream or connected-datagram socket that feeds a meter.
// For TCP the packet counts are replaced by TCP_INFO's segment counters.
type meteredConn struct {
	net.Conn
	m *meter
}

func (c *meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.m.read(n)
	}
	return n, err
}

func (c *meteredConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.m.wrote(n)
	}
	return n, err
}

// meteredPacketConn adapts a connected UDP socket for quic-go. It exposes
// only net.PacketConn on purpose: were ReadMsgUDP or SyscallConn visible,
// quic-go would use them and bypass the meter. A connected socket reports
// ICMP port unreachable as ECONNREFUSED, so a closed DoQ port fails at once
// instead of after the handshake timeout.
//
// With kernel timestamps (w), reads and writes go through the wiredConn
// rw, which stamps each datagram.
type meteredPacketConn struct {
	c  *net.UDPConn
	rw net.Conn // c, or c taking kernel timestamps
	w  *wireClock
	m  *meter
}

func newMeteredPacketConn(c *net.UDPConn, m *meter) *meteredPacketConn {
	rw, w := wire(c)
	return &meteredPacketConn{c: c, rw: rw, w: w, m: m}
}

func (c *meteredPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := c.rw.Read(b)
	if n > 0 {
		c.m.read(n)
	}
	return n, c.c.RemoteAddr(), err
}

func (c *meteredPacketConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	n, err := c.rw.Write(b)
	if n > 0 {
		c.m.wrote(n)
	}
	return n, err
}

func (c *meteredPacketConn) Close() error                       { return c.c.Close() }
func (c *meteredPacketConn) LocalAddr() net.Addr                { return c.c.LocalAddr() }
func (c *meteredPacketConn) SetDeadline(t time.Time) error      { return c.c.SetDeadline(t) }
func (c *meteredPacketConn) SetReadDeadline(t time.Time) error  { return c.c.SetReadDeadline(t) }
func (c *meteredPacketConn) SetWriteDeadline(t time.Time) error { return c.c.SetWriteDeadline(t) }
func (c *meteredPacketConn) SetReadBuffer(n int) error          { return c.c.SetReadBuffer(n) }
func (c *meteredPacketConn) SetWriteBuffer(n int) error         { return c.c.SetWriteBuffer(n) }

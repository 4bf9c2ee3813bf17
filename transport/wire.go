package transport

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/internal/wirets"
)

// wireClock keeps a socket's kernel timestamps (package wirets): the first
// packet out, the first packet out after arm (a query), and the latest
// packets in, each with when Go read it, so that an exchange can take the
// last packet in that its answer could have come in.
type wireClock struct {
	rc syscall.RawConn // nil: the kernel gives no timestamps here

	mu       sync.Mutex
	firstOut time.Time
	armed    bool
	armedOut time.Time
	in       [8]wireIn // ring of the latest packets in
	next     int

	oob []byte // the reader's control-message buffer
}

type wireIn struct{ kernel, read time.Time }

// txWait bounds the wait for a transmit timestamp: the kernel queues it
// as the packet reaches the device, within the send call on loopback and
// veth.
const txWait = time.Millisecond

// newWireClock enables timestamps on c's socket; a clock that could not
// takes none, and records then have no wire times.
func newWireClock(c syscall.Conn) *wireClock {
	w := &wireClock{}
	rc, err := c.SyscallConn()
	if err == nil && wirets.Enable(rc) == nil {
		w.rc = rc
	}
	return w
}

func (w *wireClock) arm() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.armed, w.armedOut = true, time.Time{}
	w.mu.Unlock()
}

// wantTX says whether the next send should ask for its timestamp: the
// socket's first, and the first after arm.
func (w *wireClock) wantTX() bool {
	if w == nil || w.rc == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstOut.IsZero() || w.armed
}

// sent reads the transmit timestamp of a send that asked for one.
func (w *wireClock) sent() {
	t, ok := wirets.TX(w.rc, txWait)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.firstOut.IsZero() {
		w.firstOut = t
	}
	if w.armed {
		w.armedOut, w.armed = t, false
	}
	w.mu.Unlock()
}

func (w *wireClock) received(kernel time.Time) {
	now := time.Now()
	w.mu.Lock()
	w.in[w.next%len(w.in)] = wireIn{kernel, now}
	w.next++
	w.mu.Unlock()
}

// queryOut is the send time of the first packet out after arm.
func (w *wireClock) queryOut() time.Time {
	if w == nil {
		return time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armedOut
}

// times are the first packet out, the first out after arm, and the
// latest packet in that Go had read by answered.
func (w *wireClock) times(answered time.Time) (first, query, in time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.in {
		if !p.read.After(answered) && p.kernel.After(in) {
			in = p.kernel
		}
	}
	return w.firstOut, w.armedOut, in
}

// setFirstOut sets the first packet out where no send can report it: a
// TCP SYN, sent within connect(2), has no transmit timestamp, so the time
// just before the call stands for it.
func (w *wireClock) setFirstOut(t time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.firstOut.IsZero() {
		w.firstOut = t
	}
	w.mu.Unlock()
}

// wiredConn is a stream or connected-datagram socket that takes kernel
// timestamps; it reads and writes through recvmsg and sendmsg.
type wiredConn struct {
	net.Conn
	w *wireClock
}

func (c *wiredConn) Read(b []byte) (int, error) {
	n, rx, err := c.w.recvmsg(b)
	if !rx.IsZero() {
		c.w.received(rx)
	}
	if err != nil {
		return n, wrapNetErr(c.Conn, "read", err)
	}
	return n, nil
}

func (c *wiredConn) Write(b []byte) (int, error) {
	if !c.w.wantTX() {
		return c.Conn.Write(b)
	}
	n, err := c.w.sendmsg(b)
	if err != nil {
		return n, wrapNetErr(c.Conn, "write", err)
	}
	c.w.sent()
	if n < len(b) { // a short stream write: the rest as usual
		m, err := c.Conn.Write(b[n:])
		return n + m, err
	}
	return n, nil
}

// wrapNetErr gives raw errors the net package's shape, so that deadlines
// and resets classify as they do on a plain socket.
func wrapNetErr(c net.Conn, op string, err error) error {
	if errors.Is(err, io.EOF) {
		return err
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// keepStamping holds one timestamping socket open for the process's life.
// The kernel turns receive timestamps on for all packets while any socket
// asks for them, and off (after a delay) when none does; it turns them on
// from a work queue, so the first packets after may have none. One socket
// kept open, and seen to receive a stamped packet from itself on
// loopback, keeps every later exchange stamped from its first packet.
var keepStamping = sync.OnceFunc(func() {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return
	}
	rw, w := wireConn(c)
	if w == nil {
		c.Close()
		return
	}
	buf := make([]byte, 1)
	for range 100 { // at most ~100 ms
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.WriteTo([]byte{0}, c.LocalAddr()); err != nil {
			return
		}
		if _, err := rw.Read(buf); err == nil {
			if _, _, in := w.times(time.Now()); !in.IsZero() {
				return // stamped: leave c open
			}
		}
	}
})

// wire wraps c to take kernel timestamps, when its socket can.
func wire(c net.Conn) (net.Conn, *wireClock) {
	keepStamping()
	return wireConn(c)
}

func wireConn(c net.Conn) (net.Conn, *wireClock) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c, nil
	}
	w := newWireClock(sc)
	if w.rc == nil {
		return c, nil
	}
	return &wiredConn{Conn: c, w: w}, w
}

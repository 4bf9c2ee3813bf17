package bench

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
)

// busyPolls is how many times a saturated reader tries its socket again,
// yielding in between, before it sleeps in the netpoller: some tens of
// µs, longer than the next answer takes to come from a saturated server.
const busyPolls = 50

// A reader that sleeps whenever its socket is empty leaves its CPU idle,
// and on a VM the server then pays an inter-processor interrupt to wake
// it for every answer it writes: µs of the server's CPU per query, which
// set the server's ceiling when the server is what saturates. dnsperf's
// reader, seldom idle, does not cost it that. So while busy() holds (the
// run keeps half its window in flight), lean-path readers poll first.
// Polling spends only the generator's own, otherwise idle, CPU.

// poll makes up to busyPolls non-blocking attempts with try, while busy
// holds, yielding between them; try says whether its attempt completed
// (false: the socket had nothing). It reports whether one did.
func poll(raw syscall.RawConn, busy func() bool, try func(fd uintptr) bool) (bool, error) {
	for i := 0; i < busyPolls && busy(); i++ {
		done := false
		if err := raw.Read(func(fd uintptr) bool { done = try(fd); return true }); err != nil {
			return false, err
		}
		if done {
			return true, nil
		}
		runtime.Gosched()
	}
	return false, nil
}

// pollWhile wraps a TCP or UDP socket so that its reads poll while busy()
// holds; anything else, or a nil busy, is returned as it is.
func pollWhile(c net.Conn, busy func() bool) net.Conn {
	if busy == nil {
		return c
	}
	switch c := c.(type) {
	case *net.TCPConn:
		if rc, err := c.SyscallConn(); err == nil {
			return &pollConn{TCPConn: c, rc: rc, busy: busy}
		}
	case *net.UDPConn:
		if rc, err := c.SyscallConn(); err == nil {
			return &pollUDPConn{UDPConn: c, rc: pollRaw{rc, busy}}
		}
	}
	return c
}

// pollConn is a TCP connection whose Read polls.
type pollConn struct {
	*net.TCPConn
	rc   syscall.RawConn
	busy func() bool
}

func (p *pollConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return p.TCPConn.Read(b)
	}
	var n int
	var err error
	done, rerr := poll(p.rc, p.busy, func(fd uintptr) bool {
		n, err = syscall.Read(int(fd), b)
		return err != syscall.EAGAIN && err != syscall.EINTR
	})
	switch {
	case rerr != nil:
		return 0, rerr
	case !done:
		return p.TCPConn.Read(b)
	case err != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: p.LocalAddr(), Addr: p.RemoteAddr(), Err: os.NewSyscallError("read", err)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// pollUDPConn is a UDP socket whose raw reads poll: x/net's batch reads
// (recvmmsg) go through SyscallConn.
type pollUDPConn struct {
	*net.UDPConn
	rc pollRaw
}

func (p *pollUDPConn) SyscallConn() (syscall.RawConn, error) { return p.rc, nil }

// pollRaw is a RawConn whose Read polls before it waits.
type pollRaw struct {
	syscall.RawConn
	busy func() bool
}

func (r pollRaw) Read(f func(fd uintptr) bool) error {
	if done, err := poll(r.RawConn, r.busy, f); done || err != nil {
		return err
	}
	return r.RawConn.Read(f)
}

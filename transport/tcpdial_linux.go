package transport

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dialTCP connects to addr from laddr (nil: any), as net.Dialer does, and
// also returns when connect(2) was called: the kernel timestamps no SYN,
// and a non-blocking connect sends it within the call, so that instant
// stands for its departure. It is early by the kernel's work before the
// SYN leaves (0.04-0.05 ms on the testbed); the instant the call returns
// is later by more, and less steadily, since the peer's receive path
// runs in the same call on a veth. ready is when the socket existed.
func dialTCP(ctx context.Context, laddr net.Addr, addr string) (c *net.TCPConn, ready, synSent time.Time, err error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, ready, synSent, err
	}
	family, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()})
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, ready, synSent, os.NewSyscallError("socket", err)
	}
	ready = time.Now()
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		unix.Close(fd)
		return nil, ready, synSent, os.NewSyscallError("setsockopt", err)
	}
	if la, ok := laddr.(*net.TCPAddr); ok && la != nil {
		lap := la.AddrPort()
		var lsa unix.Sockaddr = &unix.SockaddrInet4{Port: int(lap.Port()), Addr: lap.Addr().Unmap().As4()}
		if family == unix.AF_INET6 {
			lsa = &unix.SockaddrInet6{Port: int(lap.Port()), Addr: lap.Addr().As16()}
		}
		if err := unix.Bind(fd, lsa); err != nil {
			unix.Close(fd)
			return nil, ready, synSent, &net.OpError{Op: "dial", Net: "tcp", Source: laddr, Err: os.NewSyscallError("bind", err)}
		}
	}
	synSent = time.Now()
	err = unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return nil, ready, synSent, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("connect", err)}
	}
	// Wait until the socket is writable: connected or failed (SO_ERROR
	// says which). poll(2) blocks this thread for at most a handshake;
	// the connection is handed to Go's poller once it exists, so that
	// its addresses are known.
	fail := func(err error) (*net.TCPConn, time.Time, time.Time, error) {
		unix.Close(fd)
		return nil, ready, synSent, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		wait := 50
		if dl, ok := ctx.Deadline(); ok {
			wait = max(1, min(wait, int(time.Until(dl)/time.Millisecond)+1))
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, wait)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fail(os.NewSyscallError("poll", err))
		}
		if n > 0 {
			break
		}
	}
	if e, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || e != 0 {
		if err == nil {
			err = syscall.Errno(e)
		}
		return fail(os.NewSyscallError("connect", err))
	}
	f := os.NewFile(uintptr(fd), "tcp")
	fc, err := net.FileConn(f) // dups the descriptor into Go's poller
	f.Close()
	if err != nil {
		return nil, ready, synSent, err
	}
	return fc.(*net.TCPConn), ready, synSent, nil
}

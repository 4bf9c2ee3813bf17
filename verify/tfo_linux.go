package verify

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// tfoConnect turns on TCP Fast Open for a client socket: the kernel puts
// the first write (the ClientHello) into the SYN once it holds a cookie.
func tfoConnect(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// synDataAcked reads TCP_INFO's TCPI_OPT_SYN_DATA: the server took the
// data the SYN carried.
func synDataAcked(fd uintptr) bool {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && info.Options&0x20 != 0
}

package transport

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpSegments reads the kernel's segment counters (TCP_INFO, Linux 4.2+),
// which count SYNs, ACKs and retransmissions that the socket API hides.
func tcpSegments(c *net.TCPConn) (Counts, bool) {
	if c == nil {
		return Counts{}, false
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return Counts{}, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return Counts{}, false
	}
	return Counts{Sent: int64(info.Segs_out), Received: int64(info.Segs_in)}, true
}

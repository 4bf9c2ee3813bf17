//go:build unix

package server

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// canReusePort: several UDP sockets may share a port (SO_REUSEPORT).
const canReusePort = true

// msgTrunc is the flag a datagram cut short by its buffer comes with.
const msgTrunc = unix.MSG_TRUNC

// reusePort sets SO_REUSEPORT, so that several sockets share one port.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	return errors.Join(err, serr)
}

// setTCPFastOpen lets a listening socket take data in the SYN, a queue
// of 16 (RFC 7413).
func setTCPFastOpen(fd uintptr) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 16)
}

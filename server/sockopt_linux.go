package server

import "golang.org/x/sys/unix"

// setQuickAck sends a delayed ACK at once (TCP_QUICKACK, Linux only).
func setQuickAck(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1) }

// setNotSentLowat bounds a socket's unsent octets (TCP_NOTSENT_LOWAT).
func setNotSentLowat(fd uintptr, n int) {
	unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
}

package server

import (
	"errors"
	"syscall"
)

// canReusePort: Windows has no SO_REUSEPORT; the UDP listener keeps one
// socket.
const canReusePort = false

// msgTrunc: Windows reports a datagram larger than its buffer as an
// error (WSAEMSGSIZE), not as a flag.
const msgTrunc = 0

func reusePort(string, string, syscall.RawConn) error { return nil }

func setTCPFastOpen(uintptr) error {
	return errors.New("TCP Fast Open on a listener needs Linux, macOS or FreeBSD")
}

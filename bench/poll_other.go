//go:build !linux

package bench

import "net"

// pollWhile polls only on Linux (poll_linux.go); elsewhere reads sleep.
func pollWhile(c net.Conn, _ func() bool) net.Conn { return c }

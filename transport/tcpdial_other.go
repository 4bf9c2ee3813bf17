//go:build !linux

package transport

import (
	"context"
	"net"
	"syscall"
	"time"
)

// dialTCP connects with net.Dialer; the SYN's time is taken as the
// socket's, just before connect.
func dialTCP(ctx context.Context, laddr net.Addr, addr string) (*net.TCPConn, time.Time, time.Time, error) {
	var ready time.Time
	d := &net.Dialer{LocalAddr: laddr, Control: func(string, string, syscall.RawConn) error { ready = time.Now(); return nil }}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, ready, ready, err
	}
	return c.(*net.TCPConn), ready, ready, nil
}

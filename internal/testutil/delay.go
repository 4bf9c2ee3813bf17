package testutil

import (
	"net"
	"sync"
	"testing"
	"time"
)

// DelayUDP relays UDP on loopback to target and holds every reply for d
// before it goes back. A handshake through it takes at least d, so a test
// of 0-RTT does not depend on how fast a busy machine schedules the
// client: early data has d to leave before the handshake can end.
// It returns the relay's address, "127.0.0.1:port".
func DelayUDP(t testing.TB, target string, d time.Duration) string {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp", target)
	must(t, err)
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must(t, err)
	var (
		mu    sync.Mutex
		backs = map[string]*net.UDPConn{} // one upstream socket per client address
	)
	t.Cleanup(func() {
		front.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, b := range backs {
			b.Close()
		}
	})
	back := func(client *net.UDPAddr) (*net.UDPConn, error) {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := backs[client.String()]; ok {
			return b, nil
		}
		b, err := net.DialUDP("udp", nil, dst)
		if err != nil {
			return nil, err
		}
		backs[client.String()] = b
		go func() {
			buf := make([]byte, 65535)
			for {
				n, err := b.Read(buf)
				if err != nil {
					return
				}
				p := append([]byte(nil), buf[:n]...)
				time.AfterFunc(d, func() { front.WriteToUDP(p, client) })
			}
		}()
		return b, nil
	}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, client, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			b, err := back(client)
			if err != nil {
				continue
			}
			b.Write(buf[:n])
		}
	}()
	return front.LocalAddr().String()
}

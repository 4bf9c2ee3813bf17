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
// client: early data has d to leave before the handshake can end. Each
// client's replies keep their order. It returns the relay's address, "127.0.0.1:port".
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
		// A line, as a link is: the replies leave in the order they came.
		// A timer each (the relay's first form) let two replies close
		// together swap, and a QUIC client then took the response before
		// the session ticket sent ahead of it and closed without the ticket
		// (8 warm-ups in 150 lost it).
		type held struct {
			p   []byte
			due time.Time
		}
		line := make(chan held, 1024)
		go func() {
			buf := make([]byte, 65535)
			defer close(line)
			for {
				n, err := b.Read(buf)
				if err != nil {
					return
				}
				line <- held{append([]byte(nil), buf[:n]...), time.Now().Add(d)}
			}
		}()
		go func() {
			for h := range line {
				time.Sleep(time.Until(h.due))
				front.WriteToUDP(h.p, client)
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

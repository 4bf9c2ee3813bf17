package testutil

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Wire is a TCP relay on loopback that keeps the first octets each client
// sends: what the network between a client and a server sees of a TLS
// ClientHello.
type Wire struct {
	Addr string // the relay's address, "127.0.0.1:port"
	mu   sync.Mutex
	seen [][]byte
}

// Relay starts a Wire in front of to until the test ends.
func Relay(t testing.TB, to string) *Wire { return RelayAt(t, 0, to) }

// RelayAt is Relay on a port of the caller's (0: any), as one that
// relays QUIC on the same port number needs (FreePort gives one free for
// both).
func RelayAt(t testing.TB, port int, to string) *Wire {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	must(t, err)
	w := &Wire{}
	w.Addr = Serve(t, ln, func(c net.Conn) { w.serve(c, to) })
	return w
}

func (w *Wire) serve(c net.Conn, to string) {
	defer c.Close()
	s, err := net.Dial("tcp", to)
	if err != nil {
		return
	}
	defer s.Close()
	go func() {
		io.Copy(c, s)
		c.Close()
	}()
	first := make([]byte, 16384)
	n, _ := io.ReadAtLeast(c, first, 1)
	w.mu.Lock()
	w.seen = append(w.seen, first[:n])
	w.mu.Unlock()
	if _, err := s.Write(first[:n]); err != nil {
		return
	}
	io.Copy(s, c)
}

// FirstFlights is every client's first read, joined.
func (w *Wire) FirstFlights() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Join(w.seen, nil)
}

// Port is the relay's port.
func (w *Wire) Port() string {
	_, p, _ := net.SplitHostPort(w.Addr)
	return p
}

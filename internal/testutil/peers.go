package testutil

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/quic-go/quic-go"
)

// Misbehaving peers on loopback, for the tests of what talks to servers
// it does not control (transports, verify, scan): each serves what the
// test's function makes of its input, and is closed when the test ends.
// Each returns its address, host:port.

// UDPPeer answers each datagram with what reply makes of it (nothing
// for nil).
func UDPPeer(t testing.TB, reply func(in []byte) []byte) string {
	t.Helper()
	return UDPPeerAt(t, "127.0.0.1:0", reply)
}

// UDPPeerAt is UDPPeer on addr: beside a TCP peer on the same port, as
// one server's UDP and TCP.
func UDPPeerAt(t testing.TB, addr string, reply func(in []byte) []byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	must(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := reply(append([]byte(nil), buf[:n]...)); out != nil {
				pc.WriteTo(out, addr)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// TCPPeer runs serve on each connection, then closes it.
func TCPPeer(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	return Serve(t, ln, serve)
}

// TLSPeer is TCPPeer over TLS with cert, offering alpn.
func TLSPeer(t testing.TB, cert *Cert, alpn []string, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert.Pair(t)}, NextProtos: alpn})
	must(t, err)
	return Serve(t, ln, serve)
}

// Serve runs serve on each connection ln accepts, then closes it; ln is
// closed when the test ends. It returns ln's address.
func Serve(t testing.TB, ln net.Listener, serve func(c net.Conn)) string {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// QUICPeer listens for QUIC v1 with cert, offering alpn, and runs serve
// on each stream of each connection.
func QUICPeer(t testing.TB, cert *Cert, alpn []string, serve func(s *quic.Stream)) string {
	t.Helper()
	return QUICConnPeer(t, cert, alpn, func(c *quic.Conn) {
		for {
			s, err := c.AcceptStream(context.Background())
			if err != nil {
				return
			}
			go serve(s)
		}
	})
}

// ServeQUIC hands serve each connection ln accepts, on a goroutine of
// its own, until ln is closed.
func ServeQUIC(ln interface {
	Accept(context.Context) (*quic.Conn, error)
}, serve func(c *quic.Conn)) {
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

// QUICConnPeer listens for QUIC v1 with cert, offering alpn, and runs
// serve on each connection: a peer that misbehaves on the connection
// itself (closes it with a reason of its own, never opens a stream).
func QUICConnPeer(t testing.TB, cert *Cert, alpn []string, serve func(c *quic.Conn)) string {
	t.Helper()
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert.Pair(t)}, NextProtos: alpn},
		&quic.Config{Versions: []quic.Version{quic.Version1}})
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	ServeQUIC(ln, serve)
	return ln.Addr().String()
}

// Pair is the certificate and its key, for a tls.Config.
func (c *Cert) Pair(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	must(t, err)
	return pair
}

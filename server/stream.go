package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// serveStream answers DNS over TCP (RFC 7766) or, with secure, over TLS
// (RFC 7858, ALPN dot). Pipelined queries are answered as soon as each is
// ready, or strictly in order with faults.in_order.
func (s *Server) serveStream(name, addr string, secure bool) error {
	ln, err := s.listenTCP(addr)
	if err != nil {
		return err
	}
	s.track(name, ln.Addr(), ln)
	sem := make(chan struct{}, s.cfg.Limits.MaxConns)
	s.goServe(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			select {
			case sem <- struct{}{}:
			default:
				c.Close() // over the connection limit
				continue
			}
			go func() {
				defer func() { <-sem }()
				s.serveStreamConn(name, c, secure)
			}()
		}
	})
	return nil
}

func (s *Server) serveStreamConn(name string, c net.Conn, secure bool) {
	defer c.Close()
	base := Record{Transport: "tcp", Listener: name, Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String()}
	idle := s.cfg.Limits.IdleTimeout
	if secure {
		base.Transport = "dot"
		alpn := []string{"dot"}
		if s.cfg.TLS.NoDoTALPN {
			alpn = nil
		}
		tc := tls.Server(c, s.tcpTLS(alpn...))
		c.SetDeadline(time.Now().Add(idle))
		start := time.Now()
		if err := tc.Handshake(); err != nil {
			s.record(&Record{Kind: "conn", Transport: "dot", Listener: name, Remote: base.Remote, Local: base.Local, Error: err.Error()})
			return
		}
		tlsFacts(&base, tc.ConnectionState())
		conn := base
		conn.Kind, conn.HandshakeMs = "conn", ms(time.Since(start))
		s.record(&conn)
		c = tc
	}
	var wmu sync.Mutex
	write := func(r *dns.Msg) bool {
		out, err := r.Pack()
		if err != nil {
			return false
		}
		buf, err := dnswire.AppendPrefixed(make([]byte, 0, len(out)+2), out)
		if err != nil {
			return false
		}
		wmu.Lock()
		defer wmu.Unlock()
		c.SetWriteDeadline(time.Now().Add(idle))
		_, err = c.Write(buf)
		return err == nil
	}
	streams := make(chan struct{}, s.cfg.Limits.MaxStreams)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c.SetReadDeadline(time.Now().Add(idle))
		wire, err := dnswire.ReadPrefixed(c)
		if err != nil {
			return // EOF, idle timeout or broken framing: close the connection
		}
		received := time.Now()
		q, err := dnswire.Unpack(wire)
		if err != nil || len(wire) > s.cfg.Limits.MaxMsg {
			// Answer FORMERR when the header is readable (RFC 1035 §4.1.1).
			if len(wire) >= 12 {
				r := new(dns.Msg)
				r.Id, r.Response, r.Rcode = uint16(wire[0])<<8|uint16(wire[1]), true, dns.RcodeFormatError
				write(r)
			}
			continue
		}
		rec := base
		if s.cfg.Faults.InOrder {
			if r := s.handle(s.ctx, q, &rec, received); r != nil && !write(r) {
				return
			}
			continue
		}
		streams <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-streams; wg.Done() }()
			if r := s.handle(s.ctx, q, &rec, received); r != nil {
				write(r)
			}
		}()
	}
}

// listenTCP listens for TCP, with TCP Fast Open (RFC 7413) when the
// config asks for it. The kernel must allow it too: net.ipv4.tcp_fastopen
// with bit 0x2 in the server's network namespace.
func (s *Server) listenTCP(addr string) (net.Listener, error) {
	lc := net.ListenConfig{}
	if s.cfg.Limits.TCPFastOpen {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, unix.TCP_FASTOPEN, 16)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	return lc.Listen(context.Background(), "tcp", addr)
}

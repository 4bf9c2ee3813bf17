package server

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/dnswire"
)

var draftALPNs = []string{"doq-i11", "doq-i10", "doq-i09", "doq-i08", "doq-i07", "doq-i06", "doq-i05", "doq-i04", "doq-i03", "doq-i02", "doq-i01", "doq-i00"}

// serveDoQ answers DNS over QUIC (RFC 9250): one query per stream.
func (s *Server) serveDoQ(addr string) error {
	alpn := []string{"doq"}
	if s.cfg.QUIC.DraftALPNs {
		alpn = append(alpn, draftALPNs...)
	}
	if len(s.cfg.QUIC.ALPNs) > 0 {
		alpn = s.cfg.QUIC.ALPNs
	}
	ln, err := s.listenQUIC("doq", addr, s.id.tlsConfig(alpn...))
	if err != nil {
		return err
	}
	var conns atomic.Int64
	s.goServe(func() {
		for {
			c, err := ln.Accept(s.ctx)
			if err != nil {
				return
			}
			if conns.Add(1) > int64(s.cfg.Limits.MaxConns) {
				conns.Add(-1)
				c.CloseWithError(doqExcessiveLoad, "too many connections")
				continue
			}
			s.recordQUICConn(c, "doq", "doq")
			go func() {
				defer conns.Add(-1)
				for {
					str, err := c.AcceptStream(s.ctx)
					if err != nil {
						return
					}
					// Look at the handshake as the stream is accepted, not when
					// its goroutine runs: under load that can be after the
					// client's Finished has arrived.
					go s.serveDoQStream(c, str, time.Now(), handshakeDone(c))
				}
			}()
		}
	})
	return nil
}

func (s *Server) serveDoQStream(c *quic.Conn, str *quic.Stream, received time.Time, doneAtAccept bool) {
	rec := &Record{Transport: "doq", Listener: "doq", Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String()}
	quicFacts(rec, c)
	rec.EarlyData = !doneAtAccept
	str.SetReadDeadline(time.Now().Add(s.cfg.Limits.IdleTimeout))
	prefixed := dnswire.DoQPrefixed(c.ConnectionState().TLS.NegotiatedProtocol)
	var wire []byte
	var err error
	if prefixed {
		wire, err = dnswire.ReadPrefixed(str)
	} else {
		wire, err = io.ReadAll(io.LimitReader(str, dnswire.MaxMsg+1))
	}
	if err != nil || len(wire) > s.cfg.Limits.MaxMsg {
		var se *quic.StreamError
		if errors.As(err, &se) || errors.Is(err, io.EOF) && len(wire) == 0 {
			return // the client gave up on the stream
		}
		// RFC 9250 §4.3.3: a framing violation is a connection error.
		c.CloseWithError(doqProtocolError, "bad message framing")
		return
	}
	q, err := doqQuery(wire)
	if err != nil {
		c.CloseWithError(doqProtocolError, err.Error())
		return
	}
	if rec.EarlyData && q.Opcode != dns.OpcodeQuery {
		// RFC 9250 §4.5: only QUERY and NOTIFY may be answered from 0-RTT.
		select {
		case <-c.HandshakeComplete():
		case <-c.Context().Done():
			return
		}
	}
	r := s.handle(c.Context(), q, rec, received)
	if r == nil {
		return // dropped: the client times out
	}
	r.Id = 0
	out, err := r.Pack()
	if err != nil {
		str.CancelWrite(quic.StreamErrorCode(doqProtocolError))
		return
	}
	if prefixed {
		out, _ = dnswire.AppendPrefixed(nil, out)
	}
	str.SetWriteDeadline(time.Now().Add(s.cfg.Limits.IdleTimeout))
	str.Write(out)
	str.Close()
}

// doqQuery parses a DoQ query and applies RFC 9250's rules for it; an
// error is a connection error DOQ_PROTOCOL_ERROR.
func doqQuery(wire []byte) (*dns.Msg, error) {
	q, err := dnswire.Unpack(wire)
	if err != nil {
		return nil, err
	}
	if q.Id != 0 { // §4.2.1
		return nil, errors.New("message ID is not 0")
	}
	if o := q.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if opt.Option() == dns.EDNS0TCPKEEPALIVE { // §5.5.2
				return nil, errors.New("edns-tcp-keepalive over DoQ")
			}
		}
	}
	return q, nil
}

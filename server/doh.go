package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/doxlab/doxlab/internal/dnswire"
)

type quicConnKey struct{}

// dohHandler answers RFC 8484 GET and POST and the JSON API on any HTTP
// version; the record says which version really carried it.
func (s *Server) dohHandler(listener string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		received := time.Now()
		rec := &Record{Listener: listener, Remote: r.RemoteAddr}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			rec.Local = la.String()
		}
		switch r.ProtoMajor {
		case 3:
			rec.Transport = "doh3"
		case 2:
			rec.Transport = "doh2"
		default:
			rec.Transport = "doh1"
		}
		if c, ok := r.Context().Value(quicConnKey{}).(*quic.Conn); ok {
			quicFacts(rec, c)
			rec.Local = c.LocalAddr().String()
		} else if r.TLS != nil {
			tlsFacts(rec, *r.TLS)
		}
		q, asJSON, err := dnswire.ParseDoHRequest(r)
		if err == nil && !asJSON && s.cfg.DoHJSONOnly {
			err = &dnswire.HTTPError{Code: http.StatusUnsupportedMediaType, Msg: "only application/dns-json here"}
		}
		if err != nil {
			var he *dnswire.HTTPError
			errors.As(err, &he)
			rec.Kind, rec.Error = "query", err.Error()
			s.record(rec)
			http.Error(w, he.Msg, he.Code)
			return
		}
		id := q.Id
		resp := s.handle(r.Context(), q, rec, received)
		if resp == nil {
			<-r.Context().Done() // dropped: the client times out
			return
		}
		resp.Id = id
		w.Header().Set("Cache-Control", "max-age="+strconv.Itoa(int(minTTL(resp)))) // RFC 8484 §5.1
		if asJSON {
			w.Header().Set("Content-Type", dnswire.MimeJSON)
			w.Write(dnswire.EncodeJSON(resp))
			return
		}
		out, err := resp.Pack()
		if err != nil {
			http.Error(w, "packing answer", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", dnswire.MimeDNS)
		w.Write(out)
	}
}

func minTTL(m *dns.Msg) uint32 {
	ttl := uint32(300)
	for _, rr := range append(append([]dns.RR{}, m.Answer...), m.Ns...) {
		ttl = min(ttl, rr.Header().Ttl)
	}
	return ttl
}

// serveHTTPS serves h over TLS on TCP with HTTP/2 and HTTP/1.1. Go's
// server reads a pipelined HTTP/1.1 request only after answering the one
// before, so DoH/1.1 pipelining is answered strictly in order.
func (s *Server) serveHTTPS(name, addr string, h http.Handler) (net.Addr, error) {
	ln, err := s.listenTCP(addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         s.tcpTLS("h2", "http/1.1"),
		IdleTimeout:       s.cfg.Limits.IdleTimeout,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		Protocols:         new(http.Protocols),
		ConnState:         s.limitConns(),
		ErrorLog:          quietLog(),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	s.track(name, ln.Addr(), srv)
	s.goServe(func() { srv.Serve(tlsListener{ln, srv.TLSConfig}) })
	return ln.Addr(), nil
}

type tlsListener struct {
	net.Listener
	conf *tls.Config
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, l.conf), nil
}

// limitConns closes connections over the limit as they arrive.
func (s *Server) limitConns() func(net.Conn, http.ConnState) {
	sem := make(chan struct{}, s.cfg.Limits.MaxConns)
	return func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			select {
			case sem <- struct{}{}:
			default:
				c.Close()
			}
		case http.StateClosed, http.StateHijacked:
			select {
			case <-sem:
			default:
			}
		}
	}
}

func (s *Server) dohMux(listener string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc(s.cfg.DoHPath, s.dohHandler(listener))
	return mux
}

// serveDoH answers DoH over HTTP/1.1 and HTTP/2.
func (s *Server) serveDoH(addr string) error {
	_, err := s.serveHTTPS("doh", addr, s.dohMux("doh"))
	return err
}

// serveHTTP3 serves h over HTTP/3 on a QUIC listener of ours, so 0-RTT,
// Retry and the shared keys apply as on DoQ.
func (s *Server) serveHTTP3(name, addr string, h http.Handler) error {
	ln, err := s.listenQUIC(name, addr, s.id.tlsConfig(http3.NextProtoH3))
	if err != nil {
		return err
	}
	srv := &http3.Server{
		Handler:     h,
		IdleTimeout: s.cfg.Limits.IdleTimeout,
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			s.recordQUICConn(c, name, "doh3")
			return context.WithValue(ctx, quicConnKey{}, c)
		},
	}
	s.track(name+"-h3", nil, srv)
	s.goServe(func() { srv.ServeListener(ln) })
	return nil
}

func (s *Server) serveDoH3(addr string) error {
	return s.serveHTTP3("doh3", addr, s.dohMux("doh3"))
}

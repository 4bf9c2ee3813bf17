package server

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/ech"
)

// loadECH makes the web listener's ECH keys from web.ech, nil when off.
func loadECH(c *ECH) (*ech.Keys, error) {
	if c.PublicName == "" {
		return nil, nil
	}
	var seed []byte
	if c.KeyFile != "" {
		var err error
		if seed, err = keyFile(c.KeyFile); err != nil {
			return nil, err
		}
	}
	return ech.NewKeys(c.PublicName, seed)
}

// RotateECH makes a new current ECH key (web.ech.rotate does it on a
// timer): clients with a config two rotations old are rejected and
// retry with the new one.
func (s *Server) RotateECH() error {
	if s.ech == nil {
		return nil
	}
	return s.ech.Rotate()
}

// rotateECH rotates the keys every web.ech.rotate until the server closes.
func (s *Server) rotateECH() {
	every := s.cfg.Web.ECH.Rotate
	if s.ech == nil || every <= 0 {
		return
	}
	s.goServe(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.ech.Rotate()
			}
		}
	})
}

// echConn follows one connection that offered ECH: the name in its
// outer ClientHello and, when no key of ours opened it, what the client
// did next. A client holding a stale config completes the handshake
// under the public name and then aborts with ech_required (RFC 9849
// §6.1.6); a GREASE one goes on to its requests. Either comes within
// the client's first flight after the handshake, so the conn record of
// such a connection waits for its first request or its end (echWait at
// most) to tell them apart.
type echConn struct {
	outer    string
	once     sync.Once
	first    chan struct{} // closed at the first request or the end
	rejected atomic.Bool
}

// echWait bounds how long a conn record waits to tell a rejection from
// GREASE: a connection idle that long went on.
const echWait = 5 * time.Second

func newECHConn(outer string) *echConn { return &echConn{outer: outer, first: make(chan struct{})} }

// settle notes the connection's first request (rejected false) or its
// end, rejected when the client closed it with ech_required.
func (e *echConn) settle(rejected bool) {
	if e == nil {
		return
	}
	e.once.Do(func() {
		e.rejected.Store(rejected)
		close(e.first)
	})
}

// wait returns once the connection settled, ended (done), or echWait
// passed; ended is called then to say whether the end was a rejection.
func (e *echConn) wait(done <-chan struct{}, ended func() bool) {
	// A nil done never fires: the caller learns of the end elsewhere.
	t := time.NewTimer(echWait)
	defer t.Stop()
	select {
	case <-e.first:
	case <-done:
		e.settle(ended())
	case <-t.C:
	}
}

// isECHRequired says whether err is the peer's ech_required alert,
// over TCP (crypto/tls's "remote error") or QUIC (CRYPTO_ERROR 0x179).
func isECHRequired(err error) bool {
	var te *quic.TransportError
	if errors.As(err, &te) {
		return te.Remote && te.ErrorCode == quic.TransportErrorCode(0x100+121)
	}
	return err != nil && strings.Contains(err.Error(), "encrypted client hello required")
}

// echOuter holds the connections over TCP that offered ECH, by the
// net.Conn crypto/tls serves, until their conn record is written.
type echOuter struct{ m sync.Map } // net.Conn -> *echConn

func (o *echOuter) get(c net.Conn) *echConn {
	if o == nil {
		return nil
	}
	v, _ := o.m.Load(c)
	e, _ := v.(*echConn)
	return e
}

// withECH has cfg serve ECH with the server's keys and follow each
// connection that offers it, in its quicConnInfo (QUIC) or in tcp.
// crypto/tls asks for the keys first with the outer ClientHello, which
// is the only time a server sees the name the network saw.
func (s *Server) withECH(cfg *tls.Config, tcp *echOuter) *tls.Config {
	if s.ech == nil {
		return cfg
	}
	cfg.GetEncryptedClientHelloKeys = func(chi *tls.ClientHelloInfo) ([]tls.EncryptedClientHelloKey, error) {
		if info, ok := chi.Context().Value(quicInfoKey{}).(*quicConnInfo); ok {
			info.ech.CompareAndSwap(nil, newECHConn(chi.ServerName))
		} else if chi.Conn != nil && tcp != nil {
			tcp.m.LoadOrStore(chi.Conn, newECHConn(chi.ServerName))
		}
		return s.ech.TLS(), nil
	}
	return cfg
}

// echFacts labels a conn record with what its ECH came to (see
// Record.ECH); e is nil when none was offered.
func echFacts(rec *Record, e *echConn, accepted bool) {
	if e == nil {
		return
	}
	rec.OuterSNI = e.outer
	switch {
	case accepted:
		rec.ECH = ech.Accepted
	case e.rejected.Load():
		rec.ECH = ech.Rejected
	default:
		rec.ECH = ech.GREASE
	}
}

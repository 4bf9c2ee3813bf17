package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net/http"

	"golang.org/x/net/http2"
)

// serveH2 serves HTTP/2 on tc with each response ending its own TLS
// record. Go's HTTP/2 server writes every response ready at one moment
// in one write, so one record can carry several; clients that take one
// response per record read (dnsperf 2.10's DoH: src/net_doh.c has no
// have_more) then stall with answers sitting in their buffer.
// nghttp2-based servers (Unbound, Knot Resolver) write a response per
// record, and so does this.
//
// x/net's HTTP/2 server is deprecated in favour of net/http's, which
// cannot serve on a wrapped connection: hence the nolint.
func serveH2(h2 *http2.Server, hs *http.Server, tc *tls.Conn, h http.Handler, origin []byte, e *echConn) { //nolint:staticcheck
	// net/http hands TLSNextProto a handler that carries the connection's
	// context (http.Server.ConnContext's values) as BaseContext, which
	// x/net's ServeConn reads only through ConfigureServer: passed here.
	ctx := context.Background()
	if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
		ctx = bc.BaseContext()
	}
	h2.ServeConn(&recordConn{Conn: tc, origin: origin, ech: e}, &http2.ServeConnOpts{Context: ctx, BaseConfig: hs, Handler: h}) //nolint:staticcheck
}

// recordConn passes HTTP/2 frames to its TLS connection, cutting the
// writes after each frame that ends a stream, so a TLS record never spans
// two responses. Frames split across writes are followed byte by byte.
type recordConn struct {
	*tls.Conn
	hdr     [9]byte
	nhdr    int  // header octets seen of the current frame
	left    int  // payload octets left of the current frame
	closing bool // the current frame ends its stream
	// origin is an ORIGIN frame (RFC 8336) to send right after the
	// server's first frame, its SETTINGS: x/net's server writes its own
	// frames only, so it goes in between them here. nil once sent.
	origin []byte
	// ech, when the client offered ECH and no key opened it, learns
	// from the first read whether it goes on (GREASE) or aborts.
	ech *echConn
}

func (c *recordConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.ech != nil {
		c.ech.settle(n == 0 && isECHRequired(err))
		c.ech = nil
	}
	return n, err
}

// tlsConn is the connection net/http's hooks know this one by.
func (c *recordConn) tlsConn() *tls.Conn { return c.Conn }

const (
	h2FrameData      = 0x0
	h2FrameHeaders   = 0x1
	h2FrameSettings  = 0x4
	h2FlagEndStream  = 0x1
	h2FrameHeaderLen = 9
)

func (c *recordConn) Write(p []byte) (int, error) {
	done, from := 0, 0
	flush := func(to int) error {
		n, err := c.Conn.Write(p[from:to])
		done += n
		from = to
		return err
	}
	for i := 0; i < len(p); {
		if c.nhdr < h2FrameHeaderLen {
			n := copy(c.hdr[c.nhdr:], p[i:])
			c.nhdr += n
			i += n
			if c.nhdr < h2FrameHeaderLen {
				break
			}
			c.left = int(binary.BigEndian.Uint32(c.hdr[:4]) >> 8)
			t, f := c.hdr[3], c.hdr[4]
			c.closing = (t == h2FrameData || t == h2FrameHeaders) && f&h2FlagEndStream != 0
		}
		n := min(c.left, len(p)-i)
		i += n
		c.left -= n
		if c.left > 0 {
			break
		}
		c.nhdr = 0 // the frame is whole
		if c.origin != nil && c.hdr[3] == h2FrameSettings {
			if err := flush(i); err != nil {
				return done, err
			}
			_, err := c.Conn.Write(c.origin)
			c.origin = nil
			if err != nil {
				return done, err
			}
		}
		if c.closing {
			c.closing = false
			if err := flush(i); err != nil {
				return done, err
			}
		}
	}
	if from < len(p) {
		if err := flush(len(p)); err != nil {
			return done, err
		}
	}
	return done, nil
}

package pageload

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"slices"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/doxlab/doxlab/internal/h3ext"
)

// serverStreams takes the server's unidirectional streams: the ORIGIN
// stream (docs/origin.md) is read here, every other one goes to HTTP/3.
func (ld *load) serverStreams(qc *quic.Conn, rc *http3.RawClientConn, c *originConn, info *Conn) {
	for {
		str, err := qc.AcceptUniStream(qc.Context())
		if err != nil {
			return
		}
		go func() {
			if typ, n, err := h3ext.PeekVarint(str); err == nil && typ == h3ext.OriginStreamType {
				if _, err := io.ReadFull(str, make([]byte, n)); err == nil {
					ld.readOrigins(str, c, info)
				}
				return
			}
			rc.HandleUnidirectionalStream(str)
		}()
	}
}

// readOrigins reads ORIGIN frames until the stream ends or breaks its
// framing; each adds to the connection's origin set (RFC 8336 §2.3).
func (ld *load) readOrigins(str *quic.ReceiveStream, c *originConn, info *Conn) {
	r := quicvarint.NewReader(str)
	for {
		typ, payload, err := h3ext.ReadFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				str.CancelRead(0x106) // H3_FRAME_ERROR: read no further
			}
			return
		}
		if typ != h3ext.FrameOrigin {
			continue
		}
		origins, _ := h3ext.ParseOrigin(payload) // entries before a framing error count
		c.omu.Lock()
		first := c.announced == nil
		if first {
			c.announced = map[string]bool{}
		}
		var added []string // new to the set: a list scanned per entry was quadratic
		for _, o := range origins {
			if !c.announced[o] {
				c.announced[o] = true
				added = append(added, o)
			}
		}
		c.omu.Unlock()
		ld.mu.Lock()
		if first {
			info.OriginMs = ld.since()
		}
		info.Announced = append(info.Announced, added...)
		ld.mu.Unlock()
		if first {
			close(c.originCh)
		}
	}
}

// announces says whether c's server has announced host's origin.
func (c *originConn) announces(host string, port int) bool {
	c.omu.Lock()
	defer c.omu.Unlock()
	return c.announced[h3ext.Origin(host, port)]
}

// byOrigin returns an open connection that announced host's origin, and
// records the lookup it spared: none of the DNS's time, no query.
// The certificate must cover the origin (RFC 8336 §2.4).
func (ld *load) byOrigin(ctx context.Context, host, origin string) *originConn {
	if !ld.l.cfg.Origins {
		return nil
	}
	ld.mu.Lock()
	open := slices.Clone(ld.opened)
	ld.mu.Unlock()
	for _, c := range open {
		if c.err == nil && c.originCh != nil && c.announces(host, ld.l.cfg.Port) && ld.serves(ctx, c, host, origin) {
			ld.spared(host, c)
			return c
		}
	}
	return nil
}

// spared records a lookup the ORIGIN frame made unnecessary.
func (ld *load) spared(host string, c *originConn) {
	now := ld.since()
	ld.mu.Lock()
	ld.res.Lookups = append(ld.res.Lookups, &Lookup{Host: host, Transport: "origin", Coalesced: true, Conn: c.index,
		StartMs: now, EndMs: now, Addrs: []string{c.remote.Addr().String()}})
	ld.mu.Unlock()
}

// raceOrigin waits for either a lookup's result or c's ORIGIN frame
// announcing host, whichever comes first: with ORIGIN frames, the
// coalesced lookup's answer and the origin set race on one connection.
func (ld *load) raceOrigin(ctx context.Context, c *originConn, host string, lookup func(context.Context) ([]netip.Addr, *Lookup, error)) ([]netip.Addr, *Lookup, error) {
	if !ld.l.cfg.Origins || c.originCh == nil {
		return lookup(ctx)
	}
	if c.announces(host, ld.l.cfg.Port) {
		return []netip.Addr{c.remote.Addr()}, &Lookup{Transport: "origin", Coalesced: true, Conn: c.index}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		addrs []netip.Addr
		lk    *Lookup
		err   error
	}
	done := make(chan result, 1)
	go func() {
		a, lk, err := lookup(ctx)
		done <- result{a, lk, err}
	}()
	select {
	case r := <-done:
		return r.addrs, r.lk, r.err
	case <-c.originCh:
		if c.announces(host, ld.l.cfg.Port) {
			return []netip.Addr{c.remote.Addr()}, &Lookup{Transport: "origin", Coalesced: true, Conn: c.index}, nil
		}
		r := <-done
		return r.addrs, r.lk, r.err
	}
}

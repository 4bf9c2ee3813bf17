package pageload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/doxlab/doxlab/internal/h3ext"
)

// serverStreams takes the server's unidirectional streams: its control
// stream is read here, for its SETTINGS and the ORIGIN frames RFC 9412
// puts there (docs/origin.md); every other one goes to HTTP/3. quic-go's
// HTTP/3 client needs the server's SETTINGS only for extensions the
// loader does not use (datagrams, extended CONNECT).
func (ld *load) serverStreams(qc *quic.Conn, rc *http3.RawClientConn, c *originConn, info *Conn, settled func(map[uint64]uint64)) {
	var control atomic.Bool
	for {
		str, err := qc.AcceptUniStream(qc.Context())
		if err != nil {
			return
		}
		go func() {
			typ, n, err := h3ext.PeekVarint(str)
			if err != nil || typ != h3ext.StreamControl {
				rc.HandleUnidirectionalStream(str)
				return
			}
			if !control.CompareAndSwap(false, true) {
				qc.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeStreamCreationError), "a second control stream")
				return
			}
			if _, err := io.ReadFull(str, make([]byte, n)); err == nil {
				ld.readControl(qc, str, c, info, settled)
			}
		}()
	}
}

// readControl reads the server's control stream: SETTINGS first, then
// ORIGIN frames, each adding to the connection's origin set (RFC 8336
// §2.3), GOAWAY and unknown frames skipped, as RFC 9114 §6.2.1 and
// §7.2 say. What breaks the rules ends the connection.
func (ld *load) readControl(qc *quic.Conn, str *quic.ReceiveStream, c *originConn, info *Conn, settled func(map[uint64]uint64)) {
	fail := func(code http3.ErrCode, msg string) {
		qc.CloseWithError(quic.ApplicationErrorCode(code), msg)
	}
	r := quicvarint.NewReader(str)
	for first := true; ; first = false {
		typ, n, err := h3ext.ReadFrameHeader(r)
		if err != nil {
			if errors.Is(err, h3ext.ErrFrame) {
				fail(http3.ErrCodeFrameError, "")
			} else {
				fail(http3.ErrCodeClosedCriticalStream, "the control stream ended")
			}
			return
		}
		switch {
		case first && typ != h3ext.FrameSettings:
			fail(http3.ErrCodeMissingSettings, "")
			return
		case typ == h3ext.FrameSettings && first, typ == h3ext.FrameOrigin:
			payload, err := h3ext.ReadPayload(r, n)
			if err != nil {
				fail(http3.ErrCodeFrameError, "")
				return
			}
			if typ == h3ext.FrameOrigin {
				// What servers announce counts against the page's bound,
				// as its bodies do: a stream of ORIGIN frames is no cheaper.
				if err := ld.charge(len(payload)); err != nil {
					ld.abort(err)
					fail(http3.ErrCodeExcessiveLoad, "")
					return
				}
				origins, _ := h3ext.ParseOrigin(payload) // entries before a framing error count
				ld.announced(c, info, origins)
				continue
			}
			settings, err := h3ext.ParseSettings(payload)
			if err != nil {
				fail(http3.ErrCodeSettingsError, err.Error())
				return
			}
			c.settings = settings
			close(c.settingsCh)
			settled(settings)
		case typ == h3ext.FrameSettings || h3ext.UnexpectedOnControl(typ):
			fail(http3.ErrCodeFrameUnexpected, "")
			return
		default: // GOAWAY (the load's requests are few and short), and unknown frames
			if err := h3ext.Skip(r, n); err != nil {
				fail(http3.ErrCodeClosedCriticalStream, "the control stream ended")
				return
			}
		}
	}
}

// charge counts n octets of ORIGIN frames against the page's bound, as
// its bodies are counted: a stream of frames is no cheaper to hold.
func (ld *load) charge(n int) error {
	if total := ld.bytes.Add(int64(n)); total > ld.l.cfg.MaxPageBytes {
		return fmt.Errorf("page's bodies and ORIGIN frames %w of %d octets a page", ErrTooLarge, ld.l.cfg.MaxPageBytes)
	}
	return nil
}

// MaxAnnounced is the most origins one connection's set holds: more than
// any CDN announces (a page of 45 origins needs 45), few enough that a
// server announcing millions costs the loader nothing. Those past it are
// ignored.
const MaxAnnounced = 1024

// announced adds origins to c's origin set.
func (ld *load) announced(c *originConn, info *Conn, origins []string) {
	c.omu.Lock()
	first := c.announced == nil
	if first {
		c.announced = map[string]bool{}
	}
	var added []string // new to the set: a list scanned per entry was quadratic
	ignored := 0
	for _, o := range origins {
		if !c.announced[o] && len(c.announced) >= MaxAnnounced {
			ignored++
			continue
		}
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
	info.AnnouncedIgnored += ignored
	ld.mu.Unlock()
	if first {
		close(c.originCh)
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

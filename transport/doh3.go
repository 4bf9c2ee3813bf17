package transport

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// h3NoError is H3_NO_ERROR (RFC 9114 §8.1).
const h3NoError quic.ApplicationErrorCode = 0x100

// doh3Transport is DoH over HTTP/3. It drives http3.ClientConn on QUIC
// connections it dials itself, so that a GET can go out as 0-RTT and a
// rejected one is resent on the same connection's continuation.
type doh3Transport struct {
	*base
	h3   http3.Transport // only makes client conns
	kept slot[*h3Conn]
}

type h3Conn struct {
	*quicConn
	cc *http3.ClientConn
}

func newDoH3(b *base) *doh3Transport { return &doh3Transport{base: b} }

func (t *doh3Transport) Exchange(ctx context.Context, q *dns.Msg) (*Record, error) {
	return t.runOblivious(ctx, q, t.exchange)
}

const h3Family = "quic/h3"

func (t *doh3Transport) exchange(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error) {
	hc, reused, err := t.kept.get(t.opts.Reuse, func(hc *h3Conn) bool { return hc.alive() },
		func() (*h3Conn, error) { return t.dial(ctx, t.opts.ZeroRTT) })
	if err != nil {
		return nil, err
	}
	if !t.opts.Reuse {
		defer hc.close(t.opts.Session, h3Family, t.serverName(), h3NoError)
	}
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing query: %w", err)
	}
	wire[0], wire[1] = 0, 0 // RFC 8484 §4.1
	method := strings.ToUpper(orDefault(t.opts.Method, "get"))
	if t.opts.ZeroRTT && method == http.MethodGet {
		method = http3.MethodGet0RTT // http3 sends only these before the handshake
	}
	var before snapshot
	if reused {
		before = hc.m.snap()
	}
	rejected := false
	var resp *http.Response
	var body []byte
	var handedOver time.Time
	for {
		resp, body, handedOver, err = t.roundTrip(ctx, x, hc, method, wire, q)
		if !rejected && hc.rejected0RTT(err) {
			// http3 cannot carry on over a connection whose 0-RTT was
			// rejected (quic-go#3259: its cancelled streams leak into the
			// continuation), so redial with a full handshake. The record
			// keeps the rejection, and its total includes the lost round trip.
			rejected = true
			t.kept.drop(hc)
			hc.conn.CloseWithError(h3NoError, "")
			if hc, err = t.dial(ctx, false); err == nil {
				if t.opts.Reuse {
					t.kept.put(hc)
				}
				if !t.opts.Reuse {
					defer hc.close(t.opts.Session, h3Family, t.serverName(), h3NoError)
				}
				continue
			}
		}
		break
	}
	x.answered = time.Now()
	// The first datagram written after the request was handed to HTTP/3
	// carries it. Should none have been seen in that window, the hand-over
	// time bounds the query from above, so no record says 0 ms.
	x.querySent = hc.m.firstWriteAfterArm()
	if x.querySent.IsZero() || !x.querySent.Before(x.answered) {
		x.querySent = handedOver
	}
	hc.label(ctx, x, reused, rejected)
	x.wireFrom(hc.w, reused, time.Time{})
	d := hc.m.snap().since(before) // also when it failed: traffic flowed
	x.rec.Bytes, x.rec.Packets = d.bytes, d.pkts
	if resp != nil {
		x.rec.Conn.HTTPStatus = resp.StatusCode
	}
	if err != nil {
		if !hc.alive() {
			t.kept.drop(hc)
		}
		return nil, err
	}
	x.rec.DNSBytes = Counts{Sent: int64(len(wire)), Received: int64(len(body))}
	m, err := t.dohDecode(x, resp, body, q)
	if err != nil {
		return nil, err
	}
	m.Id = q.Id
	return m, nil
}

// roundTrip sends one request and reads the whole body: a rejected 0-RTT
// request can fail in either step.
func (t *doh3Transport) roundTrip(ctx context.Context, x *exch, hc *h3Conn, method string, wire []byte, q *dns.Msg) (*http.Response, []byte, time.Time, error) {
	req, err := t.dohRequest(ctx, x, method, wire, q)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	hc.m.arm()
	hc.w.arm()
	handedOver := time.Now()
	resp, err := hc.cc.RoundTrip(req)
	if err != nil {
		return nil, nil, handedOver, err
	}
	body, err := dnswire.ReadBody(resp.Body)
	return resp, body, handedOver, err
}

// dial opens an HTTP/3 connection, early (0-RTT) if asked.
func (t *doh3Transport) dial(ctx context.Context, early bool) (*h3Conn, error) {
	qc, err := t.dialQUIC(ctx, []string{http3.NextProtoH3}, h3Family, early)
	if err != nil {
		return nil, err
	}
	return &h3Conn{quicConn: qc, cc: t.h3.NewClientConn(qc.conn)}, nil
}

func (t *doh3Transport) Close() error {
	if hc, ok := t.kept.take(); ok {
		hc.close(nil, "", "", h3NoError)
	}
	return nil
}

package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/quic-go/quic-go"
)

// doqNoError is DOQ_NO_ERROR (RFC 9250 §4.3).
const doqNoError quic.ApplicationErrorCode = 0

// doqTransport is DNS over QUIC (RFC 9250): one query per bidirectional
// stream, each message behind a 2-octet length, message ID 0 on the wire.
type doqTransport struct {
	*base
	alpn []string
	kept slot[*quicConn]
}

func newDoQ(b *base) *doqTransport {
	alpn := b.opts.DoQALPNs
	if len(alpn) == 0 {
		alpn = []string{"doq"}
	}
	return &doqTransport{base: b, alpn: alpn}
}

// family keeps DoQ tickets apart from DoH/3's: 0-RTT needs the same ALPN.
func (t *doqTransport) family() string { return "quic/" + t.alpn[0] }

func (t *doqTransport) Exchange(ctx context.Context, q *dns.Msg) (*Record, error) {
	return t.run(ctx, q, t.exchange)
}

func (t *doqTransport) exchange(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error) {
	qc, reused, err := t.kept.get(t.opts.Reuse, (*quicConn).alive,
		func() (*quicConn, error) { return t.dialQUIC(ctx, t.alpn, t.family(), t.opts.ZeroRTT) })
	if err != nil {
		return nil, err
	}
	if !t.opts.Reuse {
		defer qc.close(t.opts.Session, t.family(), t.serverName(), doqNoError)
	}
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing query: %w", err)
	}
	wire[0], wire[1] = 0, 0 // RFC 9250 §4.2.1: the message ID MUST be 0
	var before snapshot
	if reused {
		before = qc.m.snap()
	}
	rejected := false
	var answer []byte
	qc.w.arm()
	for {
		answer, x.querySent, x.answered, err = doqRoundTrip(ctx, qc.conn, wire)
		if !rejected && qc.rejected0RTT(err) {
			rejected = true
			if err = qc.next(ctx); err == nil {
				continue
			}
		}
		break
	}
	qc.label(ctx, x, reused, rejected)
	x.wireFrom(qc.w, reused, time.Time{})
	d := qc.m.snap().since(before) // also when it failed: traffic flowed
	x.rec.Bytes, x.rec.Packets = d.bytes, d.pkts
	if err != nil {
		if !qc.alive() {
			t.kept.drop(qc)
		}
		return nil, err
	}
	x.rec.DNSBytes = Counts{Sent: int64(len(wire)), Received: int64(len(answer))}
	resp, err := dnswire.Unpack(answer)
	if err != nil {
		return nil, err
	}
	resp.Id = q.Id // restored locally
	return resp, nil
}

// doqRoundTrip runs one query on its own stream: write it, send FIN, read
// the answer. It returns once the answer is in hand, without waiting for
// the server's FIN or the connection to close.
func doqRoundTrip(ctx context.Context, conn *quic.Conn, wire []byte) (answer []byte, sent, at time.Time, err error) {
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, sent, at, fmt.Errorf("opening stream: %w", err)
	}
	defer func() {
		// Cancelling a stream of a rejected 0-RTT attempt would reset the
		// stream with the same ID on the continued connection (quic-go#4706).
		if err == nil {
			str.CancelRead(quic.StreamErrorCode(doqNoError))
		}
	}()
	if dl, ok := ctx.Deadline(); ok {
		str.SetDeadline(dl)
	}
	prefixed := dnswire.DoQPrefixed(conn.ConnectionState().TLS.NegotiatedProtocol)
	msg := wire
	if prefixed {
		if msg, err = dnswire.AppendPrefixed(nil, wire); err != nil {
			return nil, sent, at, err
		}
	}
	sent = time.Now()
	if _, err := str.Write(msg); err != nil {
		return nil, sent, at, fmt.Errorf("writing query: %w", err)
	}
	str.Close() // RFC 9250 §4.2: the client MUST send FIN after the query
	if prefixed {
		answer, err = dnswire.ReadPrefixed(str)
		if errors.Is(err, io.EOF) {
			err = malformed("stream closed without an answer")
		}
	} else {
		answer, err = io.ReadAll(io.LimitReader(str, dnswire.MaxMsg+1))
		switch {
		case err != nil:
		case len(answer) > dnswire.MaxMsg:
			err = malformed("answer exceeds %d octets", dnswire.MaxMsg)
		case len(answer) < dnswire.MinMsg:
			err = malformed("%d-octet answer is shorter than a DNS header", len(answer))
		}
	}
	at = time.Now()
	if err != nil {
		return nil, sent, at, err
	}
	return answer, sent, at, nil
}

func (t *doqTransport) Close() error {
	if qc, ok := t.kept.take(); ok {
		qc.close(nil, "", "", doqNoError)
	}
	return nil
}

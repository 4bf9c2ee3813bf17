package transport

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// udpTransport is classic DNS over UDP (RFC 1035 §4.2.1). The socket is
// connected, so an ICMP port unreachable ends the wait at once as
// "refused". Answers with another ID are ignored, as stub resolvers do.
type udpTransport struct {
	*base
	kept slot[*udpConn]
}

type udpConn struct {
	c   *net.UDPConn
	w   *wireClock // nil without kernel timestamps
	mux *mux
}

func (t *udpTransport) Exchange(ctx context.Context, q *dns.Msg) (*Record, error) {
	return t.run(ctx, q, t.exchange)
}

func (t *udpTransport) exchange(ctx context.Context, x *exch, q *dns.Msg) (*dns.Msg, error) {
	uc, reused, err := t.kept.get(t.opts.Reuse, func(uc *udpConn) bool { return uc.mux.alive() },
		func() (*udpConn, error) { return t.dial(ctx, x) })
	if err != nil {
		return nil, err
	}
	if !t.opts.Reuse {
		defer uc.c.Close()
	}
	x.rec.Conn.Reused = reused
	x.rec.Conn.LocalAddr, x.rec.Conn.RemoteAddr = uc.c.LocalAddr().String(), uc.c.RemoteAddr().String()
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing query: %w", err)
	}
	a, sent, wireSent, err := uc.mux.exchange(ctx, wire)
	x.querySent = sent
	if err != nil {
		return nil, err
	}
	x.answered = a.at
	x.wireFrom(uc.w, true, wireSent) // on UDP the query is the first packet
	// On UDP the DNS message is the whole payload: one datagram each way.
	x.rec.DNSBytes = Counts{Sent: int64(len(wire)), Received: int64(len(a.msg))}
	x.rec.Bytes, x.rec.Packets = x.rec.DNSBytes, Counts{Sent: 1, Received: 1}
	resp, err := dnswire.Unpack(a.msg)
	if err != nil {
		return nil, err
	}
	resp.Id = q.Id // the mux may have sent another ID to avoid one in flight
	return resp, nil
}

func (t *udpTransport) dial(ctx context.Context, x *exch) (*udpConn, error) {
	addr, err := t.serverAddr(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var ready time.Time
	var nc net.Conn
	err = t.openSocket(func() (err error) {
		nc, err = t.dialer(&ready).DialContext(ctx, "udp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening UDP socket to %s: %w", addr, err)
	}
	x.rec.Timing.SocketMs = ms(time.Since(t0))
	c := nc.(*net.UDPConn)
	buf := make([]byte, dnswire.MaxMsg)
	rw, w := wire(c)
	uc := &udpConn{c: c, w: w}
	uc.mux = newMux(
		func(b []byte) (time.Time, error) {
			w.arm()
			_, err := rw.Write(b)
			return w.queryOut(), err
		},
		func() ([]byte, error) {
			n, err := rw.Read(buf)
			if err != nil {
				return nil, err
			}
			return append([]byte(nil), buf[:n]...), nil
		}, nil, false)
	return uc, nil
}

func (t *udpTransport) Close() error {
	if uc, ok := t.kept.take(); ok {
		uc.c.Close()
	}
	return nil
}

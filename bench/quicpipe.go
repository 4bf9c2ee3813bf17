package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/transport"
)

// quicPipe is DoQ (RFC 9250) or DoH/3 on one QUIC connection, a stream
// per query. quic-go reads each stream on its own, so each query has a
// goroutine that waits for its answer and hands it to read, which calls
// got from one goroutine as the other pipes do. The socket is quic-go's
// own, unwrapped, so that it batches with GSO where the kernel can.
type quicPipe struct {
	udp     *net.UDPConn
	tr      *quic.Transport
	conn    *quic.Conn
	h3      *http3.ClientConn // DoH/3; nil for DoQ
	url     string            // DoH/3: the endpoint with "?dns=" or "&dns="
	reqs    map[string]*http.Request
	timeout time.Duration
	answers chan answer
}

type answer struct {
	slot   uint16
	status transport.Status
}

func dialQUICPipe(ctx context.Context, ep *transport.Endpoint, opts transport.Options, tlsConf *tls.Config) (*quicPipe, error) {
	raddr, err := net.ResolveUDPAddr("udp", ep.HostPort())
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, err
	}
	p := &quicPipe{udp: udp, tr: &quic.Transport{Conn: udp}, timeout: opts.Timeout, answers: make(chan answer, 4096), reqs: map[string]*http.Request{}}
	alpn := "doq"
	if ep.Protocol == transport.ProtoDoH3 {
		alpn = http3.NextProtoH3
	}
	tlsConf.NextProtos = []string{alpn}
	p.conn, err = p.tr.Dial(ctx, raddr, tlsConf, &quic.Config{MaxIdleTimeout: 30 * time.Second, KeepAlivePeriod: 10 * time.Second})
	if err != nil {
		p.close()
		return nil, err
	}
	if ep.Protocol == transport.ProtoDoH3 {
		p.h3 = (&http3.Transport{}).NewClientConn(p.conn)
		p.url = "https://" + ep.HostPort() + dohPath(ep)
	}
	return p, nil
}

func (p *quicPipe) write(seqs []uint32, qs [][]byte) error {
	for i, q := range qs {
		setID(q, 0) // RFC 9250 §4.2.1 and RFC 8484 §4.1: ID 0
		slot := uint16(seqs[i])
		if err := p.send(slot, q); err != nil {
			return err
		}
	}
	return nil
}

func (p *quicPipe) send(slot uint16, q []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	deadline := time.Now().Add(p.timeout)
	if p.h3 == nil {
		str, err := p.conn.OpenStreamSync(ctx)
		if err != nil {
			return err
		}
		str.SetDeadline(deadline)
		msg, err := dnswire.AppendPrefixed(nil, q)
		if err != nil {
			return err
		}
		if _, err := str.Write(msg); err != nil {
			return err
		}
		str.Close() // FIN after the query (RFC 9250 §4.2)
		go func() {
			m, err := dnswire.ReadPrefixed(str)
			str.CancelRead(0) // DOQ_NO_ERROR: the FIN need not be awaited
			st := transport.Classify(err)
			if err == nil {
				st = answerStatus(m)
			}
			p.answers <- answer{slot, st}
		}()
		return nil
	}
	req := p.reqs[string(q)]
	if req == nil {
		var err error
		if req, err = http.NewRequest(http.MethodGet, p.url+b64.EncodeToString(q), nil); err != nil {
			return err
		}
		req.Header.Set("accept", "application/dns-message")
		p.reqs[string(q)] = req
	}
	rs, err := p.h3.OpenRequestStream(ctx)
	if err != nil {
		return err
	}
	rs.SetDeadline(deadline)
	if err := rs.SendRequestHeader(req); err != nil {
		return err
	}
	rs.Close()
	go func() {
		resp, err := rs.ReadResponse()
		st := transport.Classify(err)
		if err == nil {
			var m []byte
			m, err = io.ReadAll(io.LimitReader(resp.Body, dnswire.MaxMsg+1))
			switch {
			case err != nil:
				st = transport.Classify(err)
			case resp.StatusCode != http.StatusOK:
				st = transport.StatusHTTP
			default:
				st = answerStatus(m)
			}
		}
		p.answers <- answer{slot, st}
	}()
	return nil
}

func (p *quicPipe) read(got func(uint16, transport.Status)) error {
	ctx := p.conn.Context()
	for {
		select {
		case a := <-p.answers:
			got(a.slot, a.status)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (p *quicPipe) limit() int { return 65535 } // quic-go waits for stream credit in OpenStreamSync

func (p *quicPipe) close() error {
	var err error
	if p.conn != nil {
		err = p.conn.CloseWithError(0, "")
	}
	return errors.Join(err, p.tr.Close(), p.udp.Close())
}

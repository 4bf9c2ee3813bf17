package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/transport"
)

// quicPipe is DoQ (RFC 9250) or DoH/3 on one QUIC connection, a stream
// per query. quic-go reads each stream on its own, so each query has a
// goroutine that waits for its answer and hands it to read, which calls
// got from one goroutine as the other pipes do. The socket is quic-go's
// own, unwrapped, so that it batches with GSO where the kernel can.
type quicPipe struct {
	udp  *net.UDPConn
	tr   *quic.Transport
	conn *quic.Conn
	h3   *http3.ClientConn // DoH/3; nil for DoQ
	// DoH/3: the authority and the endpoint's path with "?dns=" or
	// "&dns=", and each query's HEADERS frame.
	authority, path string
	reqs            map[string][]byte
	timeout         time.Duration
	answers         chan answer
}

type answer struct {
	slot   uint16
	status transport.Status
	rcode  int // noRcode without an answer
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
	p := &quicPipe{udp: udp, tr: &quic.Transport{Conn: udp}, timeout: opts.Timeout, answers: make(chan answer, 4096), reqs: map[string][]byte{}}
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
		p.authority, p.path = ep.HostPort(), dohPath(ep)
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
			st, rcode := transport.Classify(err), noRcode
			if err == nil {
				st, rcode = answerStatus(m)
			}
			p.answers <- answer{slot, st, rcode}
		}()
		return nil
	}
	// DoH/3: a GET's HEADERS frame, encoded once per query, on a stream
	// of our own; http3's ClientConn keeps the control streams.
	frame := p.reqs[string(q)]
	if frame == nil {
		var err error
		if frame, err = p.headersFrame(q); err != nil {
			return err
		}
		p.reqs[string(q)] = frame
	}
	str, err := p.conn.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	str.SetDeadline(deadline)
	if _, err := str.Write(frame); err != nil {
		return err
	}
	str.Close()
	go func() {
		status, body, err := readH3Response(str)
		st, rcode := transport.Classify(err), noRcode
		switch {
		case err != nil:
		case status != http.StatusOK:
			st = transport.StatusHTTP
		default:
			st, rcode = answerStatus(body)
		}
		p.answers <- answer{slot, st, rcode}
	}()
	return nil
}

// headersFrame is an HTTP/3 HEADERS frame (RFC 9114 §7.2.2) asking the
// DoH endpoint for q with GET, QPACK-encoded without a dynamic table.
func (p *quicPipe) headersFrame(q []byte) ([]byte, error) {
	var block bytes.Buffer
	enc := qpack.NewEncoder(&block)
	for _, f := range []qpack.HeaderField{{Name: ":method", Value: http.MethodGet}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: p.authority}, {Name: ":path", Value: p.path + b64.EncodeToString(q)},
		{Name: "accept", Value: dnswire.MimeDNS}} {
		if err := enc.WriteField(f); err != nil {
			return nil, err
		}
	}
	frame := quicvarint.Append(quicvarint.Append(nil, h3FrameHeaders), uint64(block.Len()))
	return append(frame, block.Bytes()...), nil
}

// maxInterim bounds the interim responses a request stream may carry.
const maxInterim = 5

// HTTP/3 frame types (RFC 9114 §7.2).
const (
	h3FrameData    = 0x0
	h3FrameHeaders = 0x1
)

// readH3Response reads a response off a request stream: the status from
// its final HEADERS (interim 1xx ones skipped), the body from its DATA
// frames, at most a DNS message's worth; frames of unknown types (RFC
// 9114 §9) are skipped.
func readH3Response(str io.Reader) (status int, body []byte, err error) {
	r := quicvarint.NewReader(str)
	interim := 0
	for {
		t, err := quicvarint.Read(r)
		if errors.Is(err, io.EOF) && status != 0 {
			return status, body, nil
		}
		if err != nil {
			return 0, nil, err
		}
		n, err := quicvarint.Read(r)
		if err != nil {
			return 0, nil, err
		}
		if n > dnswire.MaxMsg+1024 || uint64(len(body))+n > dnswire.MaxMsg {
			return 0, nil, dnswire.Malformed("HTTP/3 frame of %d octets", n)
		}
		switch t {
		case h3FrameHeaders:
			block := make([]byte, n)
			if _, err := io.ReadFull(r, block); err != nil {
				return 0, nil, err
			}
			if status != 0 {
				continue // trailers
			}
			next := qpack.NewDecoder().Decode(block)
			for {
				f, err := next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return 0, nil, dnswire.Malformed("QPACK: %v", err)
				}
				if f.Name == ":status" {
					status, _ = strconv.Atoi(f.Value)
				}
			}
			if status == 0 {
				return 0, nil, dnswire.Malformed("HTTP/3 response without :status")
			}
			if status < 200 && status != http.StatusSwitchingProtocols {
				// An interim response (RFC 9114 §4.1): the final one
				// follows; a few, as quic-go's client takes.
				if interim++; interim > maxInterim {
					return 0, nil, dnswire.Malformed("%d interim HTTP/3 responses", interim)
				}
				status = 0
			}
		case h3FrameData:
			if status == 0 {
				return 0, nil, dnswire.Malformed("HTTP/3 DATA before the response's HEADERS")
			}
			body = append(body, make([]byte, n)...)
			if _, err := io.ReadFull(r, body[len(body)-int(n):]); err != nil {
				return 0, nil, err
			}
		default:
			if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
				return 0, nil, err
			}
		}
	}
}

func (p *quicPipe) read(got func(uint16, transport.Status, int)) error {
	ctx := p.conn.Context()
	for {
		select {
		case a := <-p.answers:
			got(a.slot, a.status, a.rcode)
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

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/net/ipv4"

	"github.com/doxlab/doxlab/transport"
)

// dialPipe opens one connection of the lean path to ep. Over UDP and TCP
// its reads poll rather than sleep while busy() holds (pollWhile); busy
// may be nil.
func dialPipe(ctx context.Context, ep *transport.Endpoint, opts transport.Options, busy func() bool) (pipe, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var d net.Dialer
	tlsConf := func(alpn string) *tls.Config {
		name := opts.SNI
		if name == "" {
			name = ep.Host
		}
		return &tls.Config{ServerName: name, NextProtos: []string{alpn}, RootCAs: opts.RootCAs, InsecureSkipVerify: opts.Insecure,
			MinVersion: tls.VersionTLS12, CurvePreferences: opts.KeyShares}
	}
	switch ep.Protocol {
	case transport.ProtoUDP:
		c, err := d.DialContext(ctx, "udp", ep.HostPort())
		if err != nil {
			return nil, err
		}
		return newUDPPipe(c.(*net.UDPConn), busy), nil
	case transport.ProtoTCP, transport.ProtoDoT, transport.ProtoDoH2:
		c, err := d.DialContext(ctx, "tcp", ep.HostPort())
		if err != nil {
			return nil, err
		}
		c = pollWhile(c, busy)
		if ep.Protocol == transport.ProtoTCP {
			return newStreamPipe(c), nil
		}
		alpn := "dot"
		if ep.Protocol == transport.ProtoDoH2 {
			alpn = "h2"
		}
		tc := tls.Client(c, tlsConf(alpn))
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		if ep.Protocol == transport.ProtoDoT {
			return newStreamPipe(tc), nil
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			return nil, fmt.Errorf("the server chose ALPN %q, not h2", p)
		}
		return newH2Pipe(ctx, tc, ep)
	case transport.ProtoDoQ, transport.ProtoDoH3:
		return dialQUICPipe(ctx, ep, opts, tlsConf(""))
	}
	return nil, fmt.Errorf("no lean path for %s", ep.Protocol)
}

// dohPath is ep's DoH path ready for a query's base64url (RFC 8484 GET).
func dohPath(ep *transport.Endpoint) string {
	if strings.Contains(ep.Path, "?") {
		return ep.Path + "&dns="
	}
	return ep.Path + "?dns="
}

// setID sets a DNS message's ID to seq's low 16 bits.
func setID(q []byte, seq uint32) { binary.BigEndian.PutUint16(q, uint16(seq)) }

// noRcode is the rcode of a query that got no answer.
const noRcode = -1

// answerStatus is what a DNS message read as an answer says, from its
// header alone (as dnsperf reads it): malformed without 12 octets and
// QR, else its rcode's status, or truncated (TC set); and its rcode.
func answerStatus(m []byte) (transport.Status, int) {
	if len(m) < 12 || m[2]&0x80 == 0 {
		return transport.StatusMalformed, noRcode
	}
	rcode := int(m[3] & 0x0f)
	if m[2]&0x02 != 0 {
		return transport.StatusTruncated, rcode
	}
	return transport.StatusForRcode(rcode), rcode
}

// udpPipe sends and receives in batches, sendmmsg(2) and recvmmsg(2).
type udpPipe struct {
	c   *net.UDPConn
	pc  *ipv4.PacketConn // the batch calls, which serve IPv6 sockets too
	out []ipv4.Message
}

func newUDPPipe(c *net.UDPConn, busy func() bool) *udpPipe {
	c.SetReadBuffer(4 << 20) // a burst of answers must not overflow it
	c.SetWriteBuffer(4 << 20)
	return &udpPipe{c: c, pc: ipv4.NewPacketConn(pollWhile(c, busy).(net.PacketConn))}
}

func (p *udpPipe) write(seqs []uint32, qs [][]byte) error {
	p.out = p.out[:0]
	for i, q := range qs {
		setID(q, seqs[i])
		p.out = append(p.out, ipv4.Message{Buffers: [][]byte{q}})
	}
	for msgs := p.out; len(msgs) > 0; {
		n, err := p.pc.WriteBatch(msgs, 0)
		if err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

func (p *udpPipe) read(got func(uint16, transport.Status, int)) error {
	msgs := make([]ipv4.Message, 64)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 4096)}
	}
	for {
		n, err := p.pc.ReadBatch(msgs, 0)
		if err != nil {
			return err
		}
		for _, m := range msgs[:n] {
			b := m.Buffers[0][:m.N]
			if len(b) >= 2 {
				st, rcode := answerStatus(b)
				got(binary.BigEndian.Uint16(b), st, rcode)
			}
		}
	}
}

func (p *udpPipe) limit() int   { return 65535 }
func (p *udpPipe) close() error { return p.c.Close() }

// streamPipe is DNS over TCP or TLS: two-octet length prefixes,
// pipelined, answers in any order (RFC 7766).
type streamPipe struct {
	c net.Conn
	w *bufio.Writer
}

func newStreamPipe(c net.Conn) *streamPipe {
	return &streamPipe{c: c, w: bufio.NewWriterSize(c, 64<<10)}
}

func (p *streamPipe) write(seqs []uint32, qs [][]byte) error {
	for i, q := range qs {
		setID(q, seqs[i])
		p.w.Write([]byte{byte(len(q) >> 8), byte(len(q))})
		p.w.Write(q)
	}
	return p.w.Flush()
}

func (p *streamPipe) read(got func(uint16, transport.Status, int)) error {
	r := bufio.NewReaderSize(p.c, 64<<10)
	var hdr [2]byte
	buf := make([]byte, 65535)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		m := buf[:binary.BigEndian.Uint16(hdr[:])]
		if _, err := io.ReadFull(r, m); err != nil {
			return err
		}
		if len(m) >= 2 {
			st, rcode := answerStatus(m)
			got(binary.BigEndian.Uint16(m), st, rcode)
		}
	}
}

func (p *streamPipe) limit() int   { return 65535 }
func (p *streamPipe) close() error { return p.c.Close() }

// h2Pipe is DoH over HTTP/2 (RFC 8484 GET, the query's ID 0), a stream
// per query: stream 2·seq+1, so that the answer's stream gives the slot.
type h2Pipe struct {
	c         net.Conn
	bw        *bufio.Writer
	fr        *http2.Framer
	wmu       sync.Mutex // the framer's writes: the sender's and the reader's acks
	hbuf      bytes.Buffer
	henc      *hpack.Encoder
	authority string
	path      string // the endpoint's path with "?dns=" or "&dns="
	streams   int    // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	consumed  uint32 // DATA octets not yet given back with WINDOW_UPDATE
}

// The windows doxlab opens: large enough that answers never wait on flow
// control.
const (
	h2StreamWindow = 1 << 20
	h2ConnWindow   = 1 << 30
)

func newH2Pipe(ctx context.Context, c net.Conn, ep *transport.Endpoint) (*h2Pipe, error) {
	p := &h2Pipe{c: c, bw: bufio.NewWriterSize(c, 64<<10), authority: ep.HostPort(), streams: 100}
	p.fr = http2.NewFramer(p.bw, bufio.NewReaderSize(c, 64<<10))
	p.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	p.fr.MaxHeaderListSize = 64 << 10
	p.henc = hpack.NewEncoder(&p.hbuf)
	p.path = dohPath(ep)
	fail := func(err error) (*h2Pipe, error) { c.Close(); return nil, err }
	if _, err := p.bw.WriteString(http2.ClientPreface); err != nil {
		return fail(err)
	}
	if err := p.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow}); err != nil {
		return fail(err)
	}
	if err := p.fr.WriteWindowUpdate(0, h2ConnWindow); err != nil {
		return fail(err)
	}
	if err := p.bw.Flush(); err != nil {
		return fail(err)
	}
	// The server's first frame is its SETTINGS: how many streams it allows.
	if dl, ok := ctx.Deadline(); ok {
		c.SetReadDeadline(dl)
		defer c.SetReadDeadline(time.Time{})
	}
	f, err := p.fr.ReadFrame()
	if err != nil {
		return fail(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fail(fmt.Errorf("the server's first HTTP/2 frame is %v, not SETTINGS", f.Header().Type))
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
		p.streams = int(min(v, 65535))
	}
	if err := p.fr.WriteSettingsAck(); err != nil {
		return fail(err)
	}
	return p, p.bw.Flush()
}

var b64 = base64.RawURLEncoding

// write sends a HEADERS frame per query. Each :path is the query itself,
// asked once, so it goes as a literal the server does not index (as
// nghttp2 sends :path): indexing every one churned both HPACK tables for
// nothing, and Knot Resolver 5.6.0 ended such connections with GOAWAY
// FRAME_SIZE_ERROR after some thousands of them (25-44 times in 5 s;
// never once the paths were not indexed), which it never does to dnsperf.
func (p *h2Pipe) write(seqs []uint32, qs [][]byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for i, q := range qs {
		p.hbuf.Reset()
		for _, f := range [...]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: p.authority}, {Name: ":path", Value: p.path + b64.EncodeToString(q), Sensitive: true},
			{Name: "accept", Value: "application/dns-message"}} {
			p.henc.WriteField(f)
		}
		if err := p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2*seqs[i] + 1, BlockFragment: p.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			return err
		}
	}
	return p.bw.Flush()
}

func (p *h2Pipe) read(got func(uint16, transport.Status, int)) error {
	partial := map[uint32][]byte{} // DATA of answers not yet whole
	failed := map[uint32]bool{}    // streams answered with an error status, their body still to come
	slot := func(id uint32) uint16 { return uint16((id - 1) / 2) }
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			switch {
			case f.PseudoValue("status") != "200":
				got(slot(f.StreamID), transport.StatusHTTP, noRcode)
				if !f.StreamEnded() {
					failed[f.StreamID] = true
				}
			case f.StreamEnded():
				got(slot(f.StreamID), transport.StatusMalformed, noRcode) // 200 without a body
			}
		case *http2.DataFrame:
			d := f.Data()
			p.consumed += uint32(len(d))
			if p.consumed > h2ConnWindow/2 {
				if err := p.ack(func() error { return p.fr.WriteWindowUpdate(0, p.consumed) }); err != nil {
					return err
				}
				p.consumed = 0
			}
			id, end := f.StreamID, f.StreamEnded()
			switch {
			case failed[id]:
				if end {
					delete(failed, id)
				}
			case !end:
				partial[id] = append(partial[id], d...)
			default:
				if b, ok := partial[id]; ok {
					d = append(b, d...)
					delete(partial, id)
				}
				st, rcode := answerStatus(d)
				got(slot(id), st, rcode)
			}
		case *http2.RSTStreamFrame:
			delete(partial, f.StreamID)
			delete(failed, f.StreamID)
			got(slot(f.StreamID), transport.StatusReset, noRcode)
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := p.ack(p.fr.WriteSettingsAck); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := p.ack(func() error { return p.fr.WritePing(true, f.Data) }); err != nil {
					return err
				}
			}
		case *http2.GoAwayFrame:
			why := f.ErrCode.String()
			if d := f.DebugData(); len(d) > 0 {
				why += ": " + strconv.QuoteToGraphic(string(d[:min(len(d), 100)]))
			}
			// Not the last stream's number: losses count together by
			// their text (connLost).
			return fmt.Errorf("the server sent GOAWAY (%s)", why)
		}
	}
}

// ack writes a frame from the reader, between the sender's batches.
func (p *h2Pipe) ack(write func() error) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := write(); err != nil {
		return err
	}
	return p.bw.Flush()
}

func (p *h2Pipe) limit() int   { return p.streams }
func (p *h2Pipe) close() error { return p.c.Close() }

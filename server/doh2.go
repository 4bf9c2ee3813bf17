package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/odoh"
)

// HTTP/2 limits of the DoH listener.
const (
	h2MaxHeaderList = 16 << 10 // as net/http's MaxHeaderBytes on the listener
	h2MaxWindow     = 1<<31 - 1
	h2DefaultWindow = 65535
	h2MaxFrame      = 16384 // what we read; RFC 9113's default
	h2FlushAt       = 64 << 10
)

// doh2Conn answers DoH on one HTTP/2 connection (RFC 9113) itself.
// x/net's server runs a goroutine per request and writes each response
// as its goroutine ends, one write each: 0.4-0.5× Unbound's rate. Here a
// quick query is answered as soon as its request is read, and answers
// leave in one write once no further frame is already read, each still
// in a TLS record of its own (see serveH2 for why). Answers that take
// time (forwarding, faults) are computed on workers, at most max_streams
// streams at once per connection.
//
// The reader owns the read side; mu guards everything else, which
// workers touch when they write their answers.
type doh2Conn struct {
	s         *Server
	name      string
	tc        tlsConn
	bc        *batchConn                     // under tc: TLS records wait there for flush, if any
	connState func(net.Conn, http.ConnState) // the listener's hook: busy or idle
	br        *bufio.Reader
	rfr       *http2.Framer
	base      Record
	ctx       context.Context
	altSvc    string // announces the DoH/3 twin on every response; "" if none

	mu       sync.Mutex
	out      bytes.Buffer // frames not yet handed to TLS
	wfr      *http2.Framer
	hbuf     bytes.Buffer
	henc     *hpack.Encoder
	streams  map[uint32]*h2stream
	open     int    // streams counted against max_streams
	lastID   uint32 // highest stream the client opened
	sendWin  int64  // the connection's send window
	initWin  int64  // the client's initial stream window
	maxFrame uint32 // the client's largest frame
	recvWin  int64  // what the client may still send on the connection
	credit   uint32 // connection window to give back at the next flush
	closed   bool
	wg       sync.WaitGroup
}

type h2stream struct {
	id                  uint32
	method, path, ctype string
	clen                int64 // -1: not announced
	body                []byte
	recvDone            bool      // the request is whole (or refused)
	deadline            time.Time // the request must be whole by then
	sendWin, recvWin    int64
	pending             []byte // answer octets waiting for window
	waiting             bool   // pending waits for the client's window: a write under way for the slot
	busy                bool   // a worker has the query
	reset               bool   // the client reset it: a worker's answer is dropped
	head                bool
	completeAt          time.Time
}

// tlsConn is what doh2Conn needs of its connection.
type tlsConn interface {
	net.Conn
	ConnectionState() tls.ConnectionState
}

// serveDoH2 is the DoH listener's HTTP/2: net/http hands it connections
// that negotiated h2.
func (s *Server) serveDoH2(name string, hs *http.Server, tc *tls.Conn) {
	bc, _ := tc.NetConn().(*batchConn)
	s.serveH2Conn(name, tc, bc, hs.ConnState)
}

func (s *Server) serveH2Conn(name string, tc tlsConn, bc *batchConn, connState func(net.Conn, http.ConnState)) {
	if connState == nil {
		connState = func(net.Conn, http.ConnState) {}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	d := &doh2Conn{s: s, name: name, tc: tc, bc: bc, connState: connState, ctx: ctx, altSvc: s.dohAltSvc(),
		streams: map[uint32]*h2stream{}, sendWin: h2DefaultWindow, initWin: h2DefaultWindow, maxFrame: 16384, recvWin: h2DefaultWindow,
		base: Record{Kind: "query", Transport: "doh2", Listener: name, Remote: tc.RemoteAddr().String(), Local: tc.LocalAddr().String()}}
	tlsFacts(&d.base, tc.ConnectionState())
	d.br = bufio.NewReaderSize(tc, 32<<10)
	d.rfr = http2.NewFramer(nil, d.br)
	d.rfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	d.rfr.MaxHeaderListSize = h2MaxHeaderList
	d.rfr.SetMaxReadFrameSize(h2MaxFrame)
	d.rfr.SetReuseFrames()
	d.wfr = http2.NewFramer(&d.out, nil)
	d.henc = hpack.NewEncoder(&d.hbuf)
	if bc != nil {
		bc.hold(true)
	}
	d.serve()
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	cancel()
	tc.Close()
	d.wg.Wait()
}

func (d *doh2Conn) serve() {
	lim := d.s.cfg.Limits
	d.tc.SetDeadline(time.Now().Add(lim.HandshakeTimeout))
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(d.br, preface[:]); err != nil || string(preface[:]) != http2.ClientPreface {
		if err == nil || isTimeout(err) {
			d.refuse(ReasonProtocol, "no HTTP/2 connection preface")
		}
		return
	}
	d.mu.Lock()
	d.wfr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(lim.MaxStreams)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: h2MaxHeaderList})
	ok := d.flushLocked()
	d.mu.Unlock()
	if !ok {
		return
	}
	for first := true; ; first = false {
		if !first {
			if d.br.Buffered() == 0 {
				d.mu.Lock()
				ok := d.flushLocked() // nothing more read: what is answered leaves now
				d.mu.Unlock()
				if !ok {
					return
				}
			}
			// Between frames a connection may idle, or wait for a body
			// until its deadline; a frame once begun must come whole
			// within handshake_timeout.
			d.tc.SetReadDeadline(d.waitUntil())
			if _, err := d.br.Peek(1); err != nil {
				if !isTimeout(err) {
					return
				}
				if !d.expire() { // idle for idle_timeout
					d.mu.Lock()
					d.wfr.WriteGoAway(d.lastID, http2.ErrCodeNo, nil)
					d.flushLocked()
					d.mu.Unlock()
					return
				}
				continue
			}
			d.tc.SetReadDeadline(time.Now().Add(lim.HandshakeTimeout))
		}
		f, err := d.rfr.ReadFrame()
		if first {
			if _, ok := f.(*http2.SettingsFrame); err == nil && !ok {
				err = http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113 §3.4: SETTINGS first
			}
		}
		if err != nil {
			if !d.readError(f, err) {
				return
			}
			continue
		}
		if !d.frame(f) {
			return
		}
	}
}

// waitUntil is the read deadline while no frame is on its way: the
// earliest body deadline, or idle_timeout from now.
func (d *doh2Conn) waitUntil() time.Time {
	t := time.Now().Add(d.s.cfg.Limits.IdleTimeout)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range d.streams {
		if !st.recvDone && st.deadline.Before(t) {
			t = st.deadline
		}
	}
	return t
}

// expire answers 400 to each request whose body did not come in time, as
// net/http does, and reports whether the connection stays.
func (d *doh2Conn) expire() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now, n := time.Now(), 0
	for _, st := range d.streams {
		if !st.recvDone && !now.Before(st.deadline) {
			st.recvDone = true
			d.fail(st, ReasonSlow, &dnswire.HTTPError{Code: http.StatusBadRequest, Msg: "request body not received in time"})
			d.wfr.WriteRSTStream(st.id, http2.ErrCodeNo)
			n++
		}
	}
	return n > 0
}

// readError handles a frame the framer refused; false ends the connection.
func (d *doh2Conn) readError(f http2.Frame, err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		d.mu.Lock()
		defer d.mu.Unlock()
		if mh, ok := f.(*http2.MetaHeadersFrame); ok && d.streams[mh.StreamID] == nil && mh.StreamID > d.lastID {
			d.lastID = mh.StreamID // a malformed request still used its ID
		}
		d.resetLocked(se.StreamID, se.Code)
		return true
	case errors.Is(err, http2.ErrFrameTooLarge):
		d.goAway(http2.ErrCodeFrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE")
	case errors.As(err, &ce):
		d.goAway(http2.ErrCode(ce), "HTTP/2 "+http2.ErrCode(ce).String())
	case isTimeout(err):
		d.refuse(ReasonSlow, "HTTP/2 frame not received whole in time")
	}
	return false
}

// goAway ends the connection with code, a refusal of the client's.
func (d *doh2Conn) goAway(code http2.ErrCode, why string) {
	d.refuse(ReasonProtocol, why)
	d.mu.Lock()
	d.wfr.WriteGoAway(d.lastID, code, nil)
	d.flushLocked()
	d.mu.Unlock()
}

func (d *doh2Conn) refuse(reason Reason, detail string) {
	d.s.refuse(d.name, "doh2", d.tc.RemoteAddr(), reason, detail)
}

// frame acts on one frame; false ends the connection.
func (d *doh2Conn) frame(f http2.Frame) bool {
	d.mu.Lock()
	code, why := d.frameLocked(f)
	ok := d.out.Len() < h2FlushAt || d.flushLocked() // a client that sends without pause still gets its acks
	d.mu.Unlock()
	if !ok {
		return false
	}
	if code != http2.ErrCodeNo {
		d.goAway(code, why)
		return false
	}
	return true
}

// frameLocked returns an error code (and why) for a connection error.
func (d *doh2Conn) frameLocked(f http2.Frame) (http2.ErrCode, string) {
	id := f.Header().StreamID
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return http2.ErrCodeNo, ""
		}
		var code http2.ErrCode
		f.ForeachSetting(func(s http2.Setting) error {
			if err := s.Valid(); err != nil {
				code = http2.ErrCodeProtocol
				var ce http2.ConnectionError
				if errors.As(err, &ce) {
					code = http2.ErrCode(ce)
				}
				return err
			}
			switch s.ID {
			case http2.SettingHeaderTableSize:
				d.henc.SetMaxDynamicTableSizeLimit(s.Val)
			case http2.SettingInitialWindowSize:
				delta := int64(s.Val) - d.initWin
				for _, st := range d.streams {
					if st.sendWin += delta; st.sendWin > h2MaxWindow {
						code = http2.ErrCodeFlowControl
					}
				}
				d.initWin = int64(s.Val)
			case http2.SettingMaxFrameSize:
				d.maxFrame = s.Val
			}
			return nil
		})
		if code != http2.ErrCodeNo {
			return code, "bad SETTINGS"
		}
		d.wfr.WriteSettingsAck()
		d.sendPending()
	case *http2.PingFrame:
		if !f.IsAck() {
			d.wfr.WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		if id == 0 {
			if d.sendWin += int64(f.Increment); d.sendWin > h2MaxWindow {
				return http2.ErrCodeFlowControl, "connection window over 2^31-1"
			}
		} else if st := d.streams[id]; st != nil {
			if st.sendWin += int64(f.Increment); st.sendWin > h2MaxWindow {
				d.resetLocked(id, http2.ErrCodeFlowControl)
				return http2.ErrCodeNo, ""
			}
		} else if id > d.lastID {
			return http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"
		}
		d.sendPending()
	case *http2.RSTStreamFrame:
		if id > d.lastID {
			return http2.ErrCodeProtocol, "RST_STREAM on an idle stream"
		}
		if st := d.streams[id]; st != nil {
			st.reset = true
			if !st.busy {
				d.doneLocked(st)
			}
		}
	case *http2.PriorityFrame:
		if f.StreamDep == id {
			d.resetLocked(id, http2.ErrCodeProtocol) // RFC 9113 §5.3.1
		}
	case *http2.MetaHeadersFrame:
		return d.headers(f)
	case *http2.DataFrame:
		return d.data(f)
	case *http2.PushPromiseFrame:
		return http2.ErrCodeProtocol, "PUSH_PROMISE from a client"
	case *http2.GoAwayFrame:
		// The client opens no more streams; it closes when it is done.
	}
	return http2.ErrCodeNo, ""
}

// Header fields that have no place in HTTP/2 (RFC 9113 §8.2.2).
var h2ConnectionHeaders = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true, "upgrade": true}

func (d *doh2Conn) headers(f *http2.MetaHeadersFrame) (http2.ErrCode, string) {
	id := f.StreamID
	if st := d.streams[id]; st != nil {
		switch {
		case st.recvDone:
			d.resetLocked(id, http2.ErrCodeStreamClosed)
		case !f.StreamEnded():
			d.resetLocked(id, http2.ErrCodeProtocol) // trailers must end the stream
		default:
			st.recvDone = true
			d.complete(st)
		}
		return http2.ErrCodeNo, ""
	}
	if id%2 == 0 || id <= d.lastID {
		return http2.ErrCodeProtocol, fmt.Sprintf("HEADERS on stream %d", id)
	}
	d.lastID = id
	if f.HasPriority() && f.Priority.StreamDep == id {
		d.resetLocked(id, http2.ErrCodeProtocol)
		return http2.ErrCodeNo, ""
	}
	if d.open >= d.s.cfg.Limits.MaxStreams {
		d.refuse(ReasonProtocol, "more streams than max_streams")
		d.resetLocked(id, http2.ErrCodeRefusedStream)
		return http2.ErrCodeNo, ""
	}
	now := time.Now()
	st := &h2stream{id: id, method: f.PseudoValue("method"), path: f.PseudoValue("path"), clen: -1,
		deadline: now.Add(d.s.cfg.Limits.HandshakeTimeout), sendWin: d.initWin, recvWin: h2DefaultWindow}
	malformed := st.method == "" || st.path == "" || f.PseudoValue("scheme") == ""
	for _, hf := range f.RegularFields() {
		switch {
		case h2ConnectionHeaders[hf.Name], hf.Name == "te" && hf.Value != "trailers":
			malformed = true
		case hf.Name == "content-type":
			st.ctype = hf.Value
		case hf.Name == "content-length":
			n, err := strconv.ParseInt(hf.Value, 10, 64)
			if err != nil || n < 0 {
				malformed = true
			}
			st.clen = n
		}
	}
	if malformed {
		d.resetLocked(id, http2.ErrCodeProtocol)
		return http2.ErrCodeNo, ""
	}
	st.head = st.method == http.MethodHead
	d.streams[id] = st
	if d.open++; d.open == 1 {
		d.connState(d.tc, http.StateActive)
	}
	if f.Truncated {
		st.recvDone = true
		d.fail(st, ReasonTooLarge, &dnswire.HTTPError{Code: http.StatusRequestHeaderFieldsTooLarge, Msg: "request header fields too large"})
		if !f.StreamEnded() {
			d.wfr.WriteRSTStream(id, http2.ErrCodeNo)
		}
		return http2.ErrCodeNo, ""
	}
	if f.StreamEnded() {
		st.recvDone = true
		d.complete(st)
	} else if st.clen > dnswire.MaxMsg {
		// Answered before the body, which then is not wanted.
		st.recvDone = true
		d.complete(st)
		d.wfr.WriteRSTStream(id, http2.ErrCodeNo)
	}
	return http2.ErrCodeNo, ""
}

func (d *doh2Conn) data(f *http2.DataFrame) (http2.ErrCode, string) {
	id, n := f.StreamID, int64(f.Length)
	if d.recvWin -= n; d.recvWin < 0 {
		return http2.ErrCodeFlowControl, "DATA beyond the connection window"
	}
	d.credit += f.Length // the connection's window is given back at the next flush
	st := d.streams[id]
	switch {
	case st == nil && id > d.lastID:
		return http2.ErrCodeProtocol, "DATA on an idle stream"
	case st == nil || st.recvDone:
		d.resetLocked(id, http2.ErrCodeStreamClosed)
		return http2.ErrCodeNo, ""
	}
	if st.recvWin -= n; st.recvWin < 0 {
		d.resetLocked(id, http2.ErrCodeFlowControl)
		return http2.ErrCodeNo, ""
	}
	data := f.Data()
	if len(st.body)+len(data) > dnswire.MaxMsg || st.clen >= 0 && int64(len(st.body)+len(data)) > st.clen {
		st.recvDone = true
		if st.clen >= 0 && int64(len(st.body)+len(data)) > st.clen {
			d.resetLocked(id, http2.ErrCodeProtocol) // more than content-length: malformed
			return http2.ErrCodeNo, ""
		}
		d.fail(st, ReasonTooLarge, &dnswire.HTTPError{Code: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("query exceeds %d octets", dnswire.MaxMsg)})
		d.wfr.WriteRSTStream(id, http2.ErrCodeNo)
		return http2.ErrCodeNo, ""
	}
	st.body = append(st.body, data...)
	if f.StreamEnded() {
		st.recvDone = true
		if st.clen >= 0 && int64(len(st.body)) != st.clen {
			d.resetLocked(id, http2.ErrCodeProtocol)
			return http2.ErrCodeNo, ""
		}
		d.complete(st)
	} else if n > 0 {
		st.recvWin += n
		d.wfr.WriteWindowUpdate(id, uint32(n))
	}
	return http2.ErrCodeNo, ""
}

// complete answers a whole request: inline when answers are quick, else
// on a worker.
func (d *doh2Conn) complete(st *h2stream) {
	st.completeAt = time.Now()
	path, rawQuery, _ := strings.Cut(st.path, "?")
	if d.s.odoh != nil && path == odoh.ConfigsPath && st.method == http.MethodGet {
		d.respond(st, http.StatusOK, "application/octet-stream", 86400, odoh.MarshalConfigs(d.s.odoh.Config))
		return
	}
	if path != d.s.cfg.DoHPath {
		d.respond(st, http.StatusNotFound, "text/plain; charset=utf-8", -1, []byte("404 page not found\n"))
		return
	}
	if d.s.isODoH(st.ctype) {
		d.oblivious(st, rawQuery)
		return
	}
	q, asJSON, err := dnswire.ParseDoH(dnswire.DoHRequest{Method: st.method, RawQuery: rawQuery, ContentType: st.ctype, ContentLength: st.clen, Body: st.body})
	if reason, he := d.s.dohRefusal(q, asJSON, err); he != nil {
		d.fail(st, reason, he)
		return
	}
	rec, id := d.base, q.Id // the answerer may change q's ID when it forwards
	if d.s.quick() {
		d.answer(st, id, asJSON, d.s.handle(d.ctx, q, &rec, st.completeAt))
		return
	}
	var resp *dns.Msg
	d.onWorker(st, func() { resp = d.s.handle(d.ctx, q, &rec, st.completeAt) }, func() { d.answer(st, id, asJSON, resp) })
}

// onWorker runs work on a worker, then write under the lock, unless the
// connection closed or the client reset the stream meanwhile.
func (d *doh2Conn) onWorker(st *h2stream, work, write func()) {
	st.busy = true
	d.wg.Add(1)
	d.s.workers.run(func() {
		defer d.wg.Done()
		work()
		d.mu.Lock()
		defer d.mu.Unlock()
		st.busy = false
		if d.closed {
			return
		}
		if st.reset {
			d.doneLocked(st)
			return
		}
		write()
		d.flushLocked()
	})
}

// oblivious hands an ODoH message to the target or the proxy (odoh.go)
// on a worker, as net/http would: the relay waits on its target.
func (d *doh2Conn) oblivious(st *h2stream, rawQuery string) {
	r := &http.Request{Method: st.method, URL: &url.URL{Path: d.s.cfg.DoHPath, RawQuery: rawQuery}, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: http.Header{"Content-Type": {st.ctype}}, Body: io.NopCloser(bytes.NewReader(st.body)), ContentLength: int64(len(st.body)),
		RemoteAddr: d.base.Remote, Host: d.tc.LocalAddr().String()}
	cs := d.tc.ConnectionState()
	r.TLS = &cs
	r = r.WithContext(context.WithValue(d.ctx, http.LocalAddrContextKey, d.tc.LocalAddr()))
	w := &bufferedResponse{header: http.Header{}}
	d.onWorker(st, func() { d.s.oblivious(d.name, nil).ServeHTTP(w, r) }, func() {
		var extra []hpack.HeaderField
		for _, k := range []string{"Cache-Control", "Server-Timing"} {
			if v := w.header.Get(k); v != "" {
				extra = append(extra, hpack.HeaderField{Name: strings.ToLower(k), Value: v})
			}
		}
		d.respond(st, w.status, w.header.Get("Content-Type"), -1, w.body.Bytes(), extra...)
	})
}

// bufferedResponse keeps a handler's response for doh2Conn to write.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// answer writes a query's answer; a nil answer is dropped (faults): the
// stream stays until the client resets it, as the client then times out.
func (d *doh2Conn) answer(st *h2stream, id uint16, asJSON bool, resp *dns.Msg) {
	if resp == nil {
		return
	}
	ctype, maxAge, body, err := dohAnswer(id, resp, asJSON)
	if err != nil {
		d.respond(st, http.StatusInternalServerError, "text/plain; charset=utf-8", -1, []byte("packing answer\n"))
		return
	}
	d.respond(st, http.StatusOK, ctype, maxAge, body)
}

// fail answers an HTTP error and records and counts the refusal, as the
// x/net-served handler does.
func (d *doh2Conn) fail(st *h2stream, reason Reason, he *dnswire.HTTPError) {
	rec := d.base
	rec.Error = he.Error()
	d.s.record(&rec)
	d.refuse(reason, fmt.Sprintf("%d %s", he.Code, he.Msg))
	d.respond(st, he.Code, "text/plain; charset=utf-8", -1, []byte(he.Msg+"\n"))
}

// respond frames a response: HEADERS, then DATA as the windows allow.
func (d *doh2Conn) respond(st *h2stream, status int, ctype string, maxAge int, body []byte, extra ...hpack.HeaderField) {
	d.hbuf.Reset()
	d.henc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	d.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: ctype})
	for _, f := range extra {
		d.henc.WriteField(f)
	}
	if maxAge >= 0 {
		d.henc.WriteField(hpack.HeaderField{Name: "cache-control", Value: "max-age=" + strconv.Itoa(maxAge)})
	}
	if status >= 400 {
		d.henc.WriteField(hpack.HeaderField{Name: "x-content-type-options", Value: "nosniff"})
	}
	d.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
	if d.altSvc != "" {
		d.henc.WriteField(hpack.HeaderField{Name: "alt-svc", Value: d.altSvc})
	}
	if st.head {
		body = nil
	}
	d.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: d.hbuf.Bytes(), EndHeaders: true, EndStream: len(body) == 0})
	if len(body) == 0 {
		d.doneLocked(st)
	} else {
		st.pending = body
		d.sendData(st)
	}
	d.cut()
}

// sendData sends what the windows allow of a stream's answer. An answer
// waiting for the client's window counts as a write under way, so a
// client that never opens one leaves its connection stalled (pool).
func (d *doh2Conn) sendData(st *h2stream) {
	for len(st.pending) > 0 {
		n := min(int64(len(st.pending)), st.sendWin, d.sendWin, int64(d.maxFrame))
		if n <= 0 {
			if !st.waiting {
				st.waiting = true
				d.slot().writeBegin()
			}
			return
		}
		if st.waiting { // the client opened its window: progress
			st.waiting = false
			d.slot().writeEnd()
		}
		end := n == int64(len(st.pending))
		d.wfr.WriteData(st.id, end, st.pending[:n])
		st.pending, st.sendWin, d.sendWin = st.pending[n:], st.sendWin-n, d.sendWin-n
		if end {
			d.doneLocked(st)
		}
	}
}

// sendPending sends what waited for window.
func (d *doh2Conn) sendPending() {
	for _, st := range d.streams {
		if d.sendWin <= 0 {
			return
		}
		if len(st.pending) > 0 {
			d.sendData(st)
			d.cut()
		}
	}
}

// resetLocked resets a stream (a stream error).
func (d *doh2Conn) resetLocked(id uint32, code http2.ErrCode) {
	d.wfr.WriteRSTStream(id, code)
	if st := d.streams[id]; st != nil {
		st.reset = true
		if !st.busy {
			d.doneLocked(st)
		}
	}
}

// slot is the connection's slot in its listener's pool, nil if none.
func (d *doh2Conn) slot() *slot {
	if sc := stallOf(d.tc); sc != nil {
		return sc.sl.Load()
	}
	return nil
}

// doneLocked forgets a stream; the connection is idle when none is left.
func (d *doh2Conn) doneLocked(st *h2stream) {
	if st.waiting {
		st.waiting = false
		d.slot().writeEnd()
	}
	if d.streams[st.id] != st {
		return
	}
	delete(d.streams, st.id)
	if d.open--; d.open == 0 {
		d.connState(d.tc, http.StateIdle)
	}
}

// cut hands the frames so far to TLS: a response ends its own record.
func (d *doh2Conn) cut() {
	if d.out.Len() > 0 {
		d.tc.Write(d.out.Bytes())
		d.out.Reset()
	}
}

// flushLocked sends everything written, the connection window given
// back first; false if the connection is gone.
func (d *doh2Conn) flushLocked() bool {
	if d.credit > 0 {
		d.wfr.WriteWindowUpdate(0, d.credit)
		d.recvWin += int64(d.credit)
		d.credit = 0
	}
	d.cut()
	if d.bc == nil {
		return true
	}
	d.tc.SetWriteDeadline(time.Now().Add(d.s.cfg.Limits.IdleTimeout))
	return d.bc.flush() == nil
}

// batchConn is a connection under TLS that, while holding, keeps what
// TLS writes until flush: several records, one write. Up to h2FlushAt
// octets wait; more are written at once.
type batchConn struct {
	net.Conn // a stallConn
	mu       sync.Mutex
	holding  bool
	buf      []byte
}

// NetConn is the connection under c.
func (c *batchConn) NetConn() net.Conn { return c.Conn }

func (c *batchConn) hold(on bool) {
	c.mu.Lock()
	c.holding = on
	c.mu.Unlock()
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holding {
		return c.Conn.Write(p)
	}
	if len(c.buf)+len(p) > h2FlushAt {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *batchConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *batchConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

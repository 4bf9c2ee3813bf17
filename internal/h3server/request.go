package h3server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
	"golang.org/x/net/http/httpguts"

	"github.com/doxlab/doxlab/internal/h3ext"
)

// streamError ends one request stream with code; connError ends the
// connection. Both are what a malformed request costs (RFC 9114 §4.1.2,
// §8).
type streamError struct {
	code http3.ErrCode
	msg  string
}

func (e *streamError) Error() string { return fmt.Sprintf("%s (%#x)", e.msg, uint64(e.code)) }

type connError streamError

func (e *connError) Error() string { return (*streamError)(e).Error() }

var errHeaderTooLarge = errors.New("header section too large")

// HandleRequestStream reads one request off str, runs the handler and
// writes its response. It returns once the response is written or the
// stream is reset. The caller's deadlines on str bound the wait for
// the request and for the client to take the response.
func (c *Conn) HandleRequestStream(str *quic.Stream) {
	str.ReleaseStreamCredit()
	c.begin(str)
	defer c.end(str)
	r := quicvarint.NewReader(str)
	req, err := c.readRequest(r)
	if err != nil {
		var se *streamError
		var ce *connError
		switch {
		case errors.As(err, &ce):
			c.closeWith(ce.code, ce.msg)
		case errors.Is(err, errHeaderTooLarge):
			str.CancelRead(quic.StreamErrorCode(http3.ErrCodeExcessiveLoad))
			w := newResponse(str, false)
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			w.finish()
			str.Close()
		case errors.As(err, &se):
			reset(str, se.code)
		default: // cut short: the stream ended, was reset or timed out
			reset(str, http3.ErrCodeRequestIncomplete)
		}
		return
	}
	cs := c.qc.ConnectionState().TLS
	req.TLS, req.RemoteAddr = &cs, c.qc.RemoteAddr().String()
	c.prioritize(str, req)
	body := &body{c: c, str: str, r: r, remain: req.ContentLength, maxHeader: c.maxHeaderBytes()}
	req.Body = body
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	context.AfterFunc(str.Context(), cancel) // the client reset the stream, or the connection ended
	req = req.WithContext(ctx)

	w := newResponse(str, req.Method == http.MethodHead)
	if !c.serve(w, req) {
		reset(str, http3.ErrCodeInternalError)
		return
	}
	if err := w.finish(); err != nil {
		reset(str, http3.ErrCodeRequestCanceled)
		return
	}
	var se *streamError
	if errors.As(body.err, &se) { // a malformed body, whatever the handler answered
		reset(str, se.code)
		return
	}
	// The response is whole: the rest of the request is not wanted
	// (RFC 9114 §4.1.2); a no-op if the handler read it to its end.
	str.CancelRead(quic.StreamErrorCode(http3.ErrCodeNoError))
	str.Close()
}

// serve runs the handler; false if it panicked.
func (c *Conn) serve(w *response, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
		}
	}()
	c.cfg.Handler.ServeHTTP(w, req)
	return true
}

func reset(str *quic.Stream, code http3.ErrCode) {
	str.CancelRead(quic.StreamErrorCode(code))
	str.CancelWrite(quic.StreamErrorCode(code))
}

// readRequest reads frames up to the request's HEADERS (skipping
// unknown ones) and builds the request from its header section.
func (c *Conn) readRequest(r quicvarint.Reader) (*http.Request, error) {
	for {
		typ, n, err := h3ext.ReadFrameHeader(r)
		if err != nil {
			return nil, err
		}
		switch {
		case typ == h3ext.FrameHeaders:
			if n > uint64(c.maxHeaderBytes()) {
				return nil, errHeaderTooLarge
			}
			block := make([]byte, n)
			if _, err := io.ReadFull(r, block); err != nil {
				return nil, err
			}
			fields, err := c.decode(block)
			if err != nil {
				return nil, err
			}
			return c.newRequest(fields)
		case typ == h3ext.FrameData || h3ext.UnexpectedOnRequest(typ):
			return nil, &connError{http3.ErrCodeFrameUnexpected, fmt.Sprintf("frame %#x before a request's HEADERS", typ)}
		default:
			if err := h3ext.Skip(r, n); err != nil {
				return nil, err
			}
		}
	}
}

// decode reads a header section, counting its size as HTTP/2 and
// HTTP/3 do (name, value and 32 octets a field).
func (c *Conn) decode(block []byte) ([]qpack.HeaderField, error) {
	next := c.dec.Decode(block)
	var fields []qpack.HeaderField
	size := 0
	for {
		f, err := next()
		if errors.Is(err, io.EOF) {
			return fields, nil
		}
		if err != nil { // a connection error (RFC 9204 §2.2)
			return nil, &connError{http3.ErrCodeQPACKDecompressionFailed, err.Error()}
		}
		if size += len(f.Name) + len(f.Value) + 32; size > c.maxHeaderBytes() {
			return nil, errHeaderTooLarge
		}
		fields = append(fields, f)
	}
}

// connectionSpecific are HTTP/1.1's hop-by-hop fields, malformed in
// HTTP/3 (RFC 9114 §4.2).
var connectionSpecific = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true, "upgrade": true}

// newRequest builds a request from its fields, or says how they make a
// malformed request (RFC 9114 §4.1.2, §4.3.1): H3_MESSAGE_ERROR.
func (c *Conn) newRequest(fields []qpack.HeaderField) (*http.Request, error) {
	malformed := func(format string, a ...any) error {
		return &streamError{http3.ErrCodeMessageError, fmt.Sprintf(format, a...)}
	}
	pseudo := map[string]string{}
	hdr := http.Header{}
	var cookies []string
	for _, f := range fields {
		if f.Name == "" || strings.ToLower(f.Name) != f.Name {
			return nil, malformed("field name %q is not lower case", f.Name)
		}
		if !httpguts.ValidHeaderFieldValue(f.Value) {
			return nil, malformed("field %q has an invalid value", f.Name)
		}
		if f.IsPseudo() {
			if len(hdr) > 0 || len(cookies) > 0 {
				return nil, malformed("pseudo-header %s after a field", f.Name)
			}
			switch f.Name {
			case ":method", ":scheme", ":authority", ":path":
			default:
				return nil, malformed("pseudo-header %s", f.Name)
			}
			if _, dup := pseudo[f.Name]; dup {
				return nil, malformed("pseudo-header %s twice", f.Name)
			}
			pseudo[f.Name] = f.Value
			continue
		}
		if !httpguts.ValidHeaderFieldName(f.Name) || connectionSpecific[f.Name] || f.Name == "te" && f.Value != "trailers" {
			return nil, malformed("field %q", f.Name)
		}
		if f.Name == "cookie" { // split for compression, joined again (RFC 9114 §4.2.1)
			cookies = append(cookies, f.Value)
			continue
		}
		hdr.Add(f.Name, f.Value)
	}
	if len(cookies) > 0 {
		hdr.Set("Cookie", strings.Join(cookies, "; "))
	}
	method, authority := pseudo[":method"], pseudo[":authority"]
	if method == "" {
		return nil, malformed("no :method")
	}
	_, hasAuthority := pseudo[":authority"]
	host, hasHost := hdr["Host"]
	switch {
	case hasAuthority && hasHost && (len(host) != 1 || host[0] != authority):
		return nil, malformed(":authority %q and Host %q differ", authority, host) // RFC 9114 §4.3.1
	case !hasAuthority && len(host) > 1:
		return nil, malformed("%d Host fields", len(host))
	case !hasAuthority && hasHost:
		authority = host[0]
	}
	hdr.Del("Host")
	// http and https have a mandatory authority: a request to either
	// names it, in :authority or Host, and not empty (RFC 9114 §4.3.1).
	if s := pseudo[":scheme"]; (s == "https" || s == "http") && method != http.MethodConnect && authority == "" {
		return nil, malformed("no :authority or Host for %s", s)
	}
	req := &http.Request{Method: method, Proto: "HTTP/3.0", ProtoMajor: 3, Header: hdr, Host: authority, ContentLength: -1}
	if method == http.MethodConnect {
		if authority == "" || pseudo[":scheme"] != "" || pseudo[":path"] != "" {
			return nil, malformed("CONNECT with :scheme or :path, or without :authority")
		}
		req.URL, req.RequestURI = &url.URL{Host: authority}, authority
	} else {
		path, scheme := pseudo[":path"], pseudo[":scheme"]
		if path == "" || scheme == "" {
			return nil, malformed("no :path or :scheme")
		}
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return nil, malformed(":path %q", path)
		}
		u.Scheme, u.Host = scheme, authority
		req.URL, req.RequestURI = u, path
	}
	if cls := hdr.Values("Content-Length"); len(cls) > 0 {
		n, err := strconv.ParseInt(cls[0], 10, 64)
		for _, v := range cls[1:] {
			if v != cls[0] {
				err = errors.New("differ")
			}
		}
		if err != nil || n < 0 {
			return nil, malformed("content-length %q", strings.Join(cls, ","))
		}
		req.ContentLength = n
	}
	return req, nil
}

// prioritize schedules the response's stream by the request's Priority
// field (RFC 9218 §4). A client that has never sent a signal gets its
// responses interleaved, as before priorities; one that has, the RFC's
// default (urgency 3, not incremental) where it sends none.
func (c *Conn) prioritize(str *quic.Stream, req *http.Request) {
	if p, ok := c.takePending(str.StreamID()); ok { // an update wins over the field (RFC 9218 §7.1)
		str.SetPriority(p.urgency, p.incremental)
		return
	}
	if v := req.Header.Values("Priority"); len(v) > 0 {
		c.priorityAware.Store(true)
		str.SetPriority(parsePriority(strings.Join(v, ",")))
		return
	}
	str.SetPriority(defaultUrgency, !c.priorityAware.Load())
}

const defaultUrgency = 3

// parsePriority reads RFC 9218's Structured Field dictionary: u=0..7 and
// i (a boolean). Members it does not know, and parameters, are ignored;
// an out-of-range urgency keeps the default (§4.1).
func parsePriority(v string) (urgency int8, incremental bool) {
	urgency = defaultUrgency
	for member := range strings.SplitSeq(v, ",") {
		member, _, _ = strings.Cut(strings.TrimSpace(member), ";")
		key, val, has := strings.Cut(member, "=")
		switch key {
		case "u":
			if n, err := strconv.Atoi(val); err == nil && has && n >= 0 && n <= 7 {
				urgency = int8(n)
			}
		case "i":
			switch {
			case !has || val == "?1":
				incremental = true
			case val == "?0":
				incremental = false
			}
		}
	}
	return urgency, incremental
}

// body reads a request's DATA frames. It skips unknown frames, reads
// trailers (dropped: no handler here uses them), and holds the body to
// its Content-Length.
type body struct {
	c         *Conn
	str       *quic.Stream
	r         quicvarint.Reader
	left      uint64 // of the DATA frame being read
	remain    int64  // of the Content-Length, or -1
	trailers  bool
	maxHeader int
	err       error
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	for b.left == 0 {
		typ, n, err := h3ext.ReadFrameHeader(b.r)
		switch {
		case errors.Is(err, io.EOF):
			if b.remain > 0 {
				return 0, b.fail(&streamError{http3.ErrCodeMessageError, "body shorter than its content-length"})
			}
			return 0, b.fail(io.EOF)
		case err != nil:
			return 0, b.fail(err)
		case typ == h3ext.FrameData && !b.trailers:
			b.left = n
		case typ == h3ext.FrameHeaders && !b.trailers:
			if n > uint64(b.maxHeader) {
				return 0, b.fail(&streamError{http3.ErrCodeExcessiveLoad, "trailers too large"})
			}
			if err := h3ext.Skip(b.r, n); err != nil {
				return 0, b.fail(err)
			}
			b.trailers = true
		case typ == h3ext.FrameData || typ == h3ext.FrameHeaders || h3ext.UnexpectedOnRequest(typ): // DATA or HEADERS after trailers
			b.c.closeWith(http3.ErrCodeFrameUnexpected, "")
			return 0, b.fail(&connError{http3.ErrCodeFrameUnexpected, fmt.Sprintf("frame %#x in a request body", typ)})
		default:
			if err := h3ext.Skip(b.r, n); err != nil {
				return 0, b.fail(err)
			}
		}
	}
	if uint64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.str.Read(p)
	b.left -= uint64(n)
	if b.remain >= 0 {
		if b.remain -= int64(n); b.remain < 0 {
			return n, b.fail(&streamError{http3.ErrCodeMessageError, "body longer than its content-length"})
		}
	}
	if errors.Is(err, io.EOF) {
		if b.left > 0 { // a DATA frame cut short by the stream's end (RFC 9114 §7.1)
			b.c.closeWith(http3.ErrCodeFrameError, "a DATA frame cut short")
			return n, b.fail(&connError{http3.ErrCodeFrameError, "a DATA frame cut short"})
		}
		err = nil // the next Read finds the end, and checks the length
	}
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

func (b *body) fail(err error) error {
	b.err = err
	return err
}

// Close stops reading: the rest of the body is not wanted.
func (b *body) Close() error {
	if b.err == nil {
		b.err = http.ErrBodyReadAfterClose
		b.str.CancelRead(quic.StreamErrorCode(http3.ErrCodeNoError))
	}
	return nil
}

// smallResponse is how much of a body is held back before its headers
// go: a response that fits is sent with its Content-Length.
const smallResponse = 4096

// response writes a handler's response as HEADERS and DATA frames.
type response struct {
	str      *quic.Stream
	head     bool
	hdr      http.Header
	status   int // of the final response, once WriteHeader has it
	sent     bool
	held     []byte
	declared int64 // the handler's Content-Length, or -1
	written  int64
	err      error
}

func newResponse(str *quic.Stream, head bool) *response {
	return &response{str: str, head: head, hdr: http.Header{}, declared: -1}
}

func (w *response) Header() http.Header { return w.hdr }

func (w *response) WriteHeader(code int) {
	if w.status != 0 {
		return // superfluous, as net/http
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 { // informational (103 Early Hints): sent at once
		if code != http.StatusSwitchingProtocols {
			w.writeFields(code)
		}
		return
	}
	w.status = code
	if _, ok := w.hdr["Date"]; !ok {
		w.hdr.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	if cl := w.hdr.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.declared = n
		} else {
			w.hdr.Del("Content-Length")
		}
	}
}

func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.sniff(p)
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	w.written += int64(len(p))
	if w.head {
		return len(p), nil
	}
	if !w.sent && len(w.held)+len(p) <= smallResponse {
		w.held = append(w.held, p...)
		return len(p), nil
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	if err := w.data(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *response) Flush() { _ = w.FlushError() }

// FlushError sends the headers and what is held, for
// http.ResponseController.
func (w *response) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.flush()
}

func (w *response) flush() error {
	if w.err != nil {
		return w.err
	}
	if !w.sent {
		w.sniff(w.held)
		w.sent = true
		if err := w.writeFields(w.status); err != nil {
			return err
		}
	}
	held := w.held
	w.held = nil
	return w.data(held)
}

// finish ends the response once the handler returns: a body sent whole
// from what was held gets its Content-Length.
func (w *response) finish() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if _, ok := w.hdr["Content-Length"]; !ok && !w.sent && bodyAllowed(w.status) {
		w.hdr.Set("Content-Length", strconv.FormatInt(w.written, 10))
	}
	return w.flush()
}

func (w *response) sniff(p []byte) {
	if _, ok := w.hdr["Content-Type"]; !ok && w.hdr.Get("Content-Encoding") == "" && len(p) > 0 {
		w.hdr.Set("Content-Type", http.DetectContentType(p))
	}
}

// writeFields writes a HEADERS frame: the status and the header fields,
// names in lower case, HTTP/1.1's connection fields and trailer
// declarations left out.
func (w *response) writeFields(status int) error {
	var block bytes.Buffer
	enc := qpack.NewEncoder(&block)
	enc.WriteField(qpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	for k, vs := range w.hdr {
		name := strings.ToLower(k)
		if connectionSpecific[name] || name == "trailer" || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		for _, v := range vs {
			enc.WriteField(qpack.HeaderField{Name: name, Value: v})
		}
	}
	frame := quicvarint.Append(nil, h3ext.FrameHeaders)
	frame = quicvarint.Append(frame, uint64(block.Len()))
	return w.write(append(frame, block.Bytes()...))
}

func (w *response) data(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	frame := quicvarint.Append(make([]byte, 0, 16), h3ext.FrameData)
	frame = quicvarint.Append(frame, uint64(len(p)))
	if err := w.write(frame); err != nil {
		return err
	}
	return w.write(p)
}

func (w *response) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	if _, err := w.str.Write(b); err != nil {
		w.err = err
	}
	return w.err
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

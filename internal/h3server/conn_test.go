package h3server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/h3ext"
	"github.com/doxlab/doxlab/internal/testutil"
)

// serve runs one listener on loopback that serves every connection
// with cfg, and returns a dial function for raw client connections.
func serve(t *testing.T, cfg *Config) func() *quic.Conn {
	t.Helper()
	cert := testutil.NewCert(t)
	pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
	require.NoError(t, err)
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h3"}}, &quic.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			qc, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			c, err := New(qc.Context(), qc, cfg)
			if err != nil {
				continue
			}
			go func() {
				for {
					str, err := qc.AcceptUniStream(qc.Context())
					if err != nil {
						return
					}
					go c.HandleUnidirectionalStream(str)
				}
			}()
			go func() {
				for {
					str, err := qc.AcceptStream(qc.Context())
					if err != nil {
						return
					}
					str.SetReadDeadline(time.Now().Add(5 * time.Second))
					go c.HandleRequestStream(str)
				}
			}()
		}
	}()
	return func() *quic.Conn {
		qc, err := quic.DialAddr(context.Background(), ln.Addr().String(), &tls.Config{RootCAs: cert.Pool, ServerName: "localhost", NextProtos: []string{"h3"}}, &quic.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { qc.CloseWithError(0, "") })
		return qc
	}
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%s %s %s %d %q %s", r.Method, r.Host, r.Proto, r.ContentLength, r.Header.Get("Cookie"), b)
		case "/big":
			w.Header().Set("Content-Type", "application/octet-stream")
			for range 64 {
				w.Write(bytes.Repeat([]byte("x"), 1024))
			}
		case "/hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusNoContent)
		case "/panic":
			panic("boom")
		default:
			w.Write([]byte("<html>hi</html>"))
		}
	})
}

// TestRequestsAndResponses: quic-go's HTTP/3 client against this
// server: bodies both ways, Content-Length for a small response and
// streaming for a large one, HEAD, informational responses, a handler
// that panics resets only its stream.
func TestRequestsAndResponses(t *testing.T) {
	dial := serve(t, &Config{Handler: echo()})
	cc := (&http3.Transport{}).NewClientConn(dial())
	do := func(method, path string, body io.Reader, hdr ...string) (*http.Response, string, error) {
		req, _ := http.NewRequest(method, "https://localhost"+path, body)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := cc.RoundTrip(req)
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), err
	}

	resp, body, err := do(http.MethodGet, "/", nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "<html>hi</html>", body)
	require.Equal(t, int64(len(body)), resp.ContentLength, "a small response carries its length")
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"), "sniffed")
	require.NotEmpty(t, resp.Header.Get("Date"))

	_, body, err = do(http.MethodPost, "/echo", strings.NewReader("question"), "Cookie", "a=1", "Cookie", "b=2")
	require.NoError(t, err)
	require.Equal(t, `POST localhost HTTP/3.0 8 "a=1; b=2" question`, body)

	resp, body, err = do(http.MethodGet, "/big", nil)
	require.NoError(t, err)
	require.Equal(t, 64<<10, len(body))
	require.Equal(t, int64(-1), resp.ContentLength, "streamed: no length")

	resp, body, err = do(http.MethodHead, "/", nil)
	require.NoError(t, err)
	require.Empty(t, body)
	require.Equal(t, "15", resp.Header.Get("Content-Length"), "HEAD says what GET would send")

	resp, _, err = do(http.MethodGet, "/hints", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	_, _, err = do(http.MethodGet, "/panic", nil)
	require.Error(t, err)
	_, body, err = do(http.MethodGet, "/", nil)
	require.NoError(t, err, "the connection outlives a handler's panic")
	require.Equal(t, "<html>hi</html>", body)
}

// TestResponseWriterRules: the response writer keeps net/http's rules,
// which handlers rely on: a flush sends the headers and what is held at
// once (the client reads it while the handler still runs); a write past
// the Content-Length the handler declared fails with
// http.ErrContentLength, and what fits is sent; a 204's body fails with
// http.ErrBodyNotAllowed; a Content-Length that is no length is dropped,
// and the response's own length is sent.
func TestResponseWriterRules(t *testing.T) {
	read := make(chan struct{})
	errs := make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			io.WriteString(w, "first")
			errs <- http.NewResponseController(w).Flush()
			select {
			case <-read:
			case <-time.After(5 * time.Second):
				errs <- errors.New("the client never read the flushed part")
				return
			}
			io.WriteString(w, " second")
		case "/declared":
			w.Header().Set("Content-Length", "4")
			io.WriteString(w, "ab")
			_, err := io.WriteString(w, "cdef")
			errs <- err
			io.WriteString(w, "cd")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
			_, err := io.WriteString(w, "body")
			errs <- err
		case "/badlength":
			w.Header().Set("Content-Length", "-3")
			io.WriteString(w, "hi")
		}
	})
	cc := (&http3.Transport{}).NewClientConn(serve(t, &Config{Handler: h})())
	fetch := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "https://localhost"+path, nil)
		resp, err := cc.RoundTrip(req)
		require.NoError(t, err, path)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	resp := fetch("/flush")
	require.NoError(t, <-errs)
	require.Equal(t, int64(-1), resp.ContentLength, "flushed before its end: no length")
	first := make([]byte, 5)
	_, err := io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	require.Equal(t, "first", string(first), "read while the handler waits")
	close(read)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, " second", string(rest))

	resp = fetch("/declared")
	require.ErrorIs(t, <-errs, http.ErrContentLength)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "abcd", string(body))
	require.Equal(t, int64(4), resp.ContentLength)

	resp = fetch("/nocontent")
	require.ErrorIs(t, <-errs, http.ErrBodyNotAllowed)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	resp = fetch("/badlength")
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "hi", string(body))
	require.Equal(t, int64(2), resp.ContentLength)
}

// TestControlStream reads the server's control stream as a client
// does: the stream type, SETTINGS with the field section limit and the
// caller's settings, then the caller's frames (an ORIGIN frame).
func TestControlStream(t *testing.T) {
	origin, err := h3ext.AppendOrigin(nil, []string{"https://a.test", "https://b.test:8443"})
	require.NoError(t, err)
	dial := serve(t, &Config{Handler: echo(), MaxHeaderBytes: 1000, Settings: map[uint64]uint64{0x2b603742: 1}, ControlFrames: origin})
	qc := dial()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	str, err := qc.AcceptUniStream(ctx)
	require.NoError(t, err)
	r := quicvarint.NewReader(str)
	typ, err := quicvarint.Read(r)
	require.NoError(t, err)
	require.Equal(t, uint64(h3ext.StreamControl), typ)
	typ, payload, err := h3ext.ReadFrame(r)
	require.NoError(t, err)
	require.Equal(t, uint64(h3ext.FrameSettings), typ)
	settings, err := h3ext.ParseSettings(payload)
	require.NoError(t, err)
	require.Equal(t, map[uint64]uint64{h3ext.SettingMaxFieldSection: 1000, 0x2b603742: 1}, settings)
	typ, payload, err = h3ext.ReadFrame(r)
	require.NoError(t, err)
	require.Equal(t, uint64(h3ext.FrameOrigin), typ)
	origins, err := h3ext.ParseOrigin(payload)
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.test", "https://b.test:8443"}, origins)
}

// request writes a raw request stream: HEADERS with fields, then
// extra octets, and FIN.
func request(t *testing.T, qc *quic.Conn, fields []qpack.HeaderField, extra []byte) *quic.Stream {
	t.Helper()
	var block bytes.Buffer
	enc := qpack.NewEncoder(&block)
	for _, f := range fields {
		require.NoError(t, enc.WriteField(f))
	}
	str, err := qc.OpenStreamSync(context.Background())
	require.NoError(t, err)
	b := quicvarint.Append(nil, h3ext.FrameHeaders)
	b = quicvarint.Append(b, uint64(block.Len()))
	b = append(append(b, block.Bytes()...), extra...)
	_, err = str.Write(b)
	require.NoError(t, err)
	str.Close()
	return str
}

func get(path string, more ...qpack.HeaderField) []qpack.HeaderField {
	return append([]qpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: "localhost"}, {Name: ":path", Value: path}}, more...)
}

// streamCode is the code a stream was reset with, or -1 if it was not.
func streamCode(str *quic.Stream) int64 {
	str.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadAll(str)
	var se *quic.StreamError
	if errors.As(err, &se) {
		return int64(se.ErrorCode)
	}
	return -1
}

// TestMalformedRequests: what RFC 9114 §4.1.2 and §4.3.1 call malformed
// resets its stream with H3_MESSAGE_ERROR and leaves the connection up;
// a header section past the limit gets 431; a body longer than its
// Content-Length is malformed too.
func TestMalformedRequests(t *testing.T) {
	dial := serve(t, &Config{Handler: echo(), MaxHeaderBytes: 2000})
	qc := dial()
	msgErr := int64(http3.ErrCodeMessageError)
	for name, fields := range map[string][]qpack.HeaderField{
		"upper-case name":      get("/", qpack.HeaderField{Name: "X-Upper", Value: "1"}),
		"pseudo after a field": append(get("/", qpack.HeaderField{Name: "x", Value: "1"}), qpack.HeaderField{Name: ":path", Value: "/"}),
		"no :path":             get("")[:3],
		"unknown pseudo":       get("/", qpack.HeaderField{Name: ":protocol", Value: "websocket"}),
		"connection field":     get("/", qpack.HeaderField{Name: "connection", Value: "close"}),
		"te not trailers":      get("/", qpack.HeaderField{Name: "te", Value: "gzip"}),
		"two :method":          append(get("/")[:1], get("/")...),
		// RFC 9114 §4.3.1: https has a mandatory authority.
		"no :authority or Host":     {get("/")[0], get("/")[1], get("/")[3]},
		"empty :authority":          {get("/")[0], get("/")[1], {Name: ":authority"}, get("/")[3]},
		"authority and Host differ": get("/", qpack.HeaderField{Name: "host", Value: "other.example"}),
	} {
		require.Equal(t, msgErr, streamCode(request(t, qc, fields, nil)), name)
	}

	str := request(t, qc, get("/", qpack.HeaderField{Name: "x-big", Value: strings.Repeat("a", 3000)}), nil)
	b, err := io.ReadAll(str)
	require.NoError(t, err)
	typ, block, err := h3ext.ReadFrame(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, uint64(h3ext.FrameHeaders), typ)
	status, err := qpack.NewDecoder().Decode(block)()
	require.NoError(t, err)
	require.Equal(t, qpack.HeaderField{Name: ":status", Value: "431"}, status)

	post := append(get("/echo")[1:], qpack.HeaderField{Name: ":method", Value: "POST"}, qpack.HeaderField{Name: "content-length", Value: "2"})
	post[0], post[3] = post[3], post[0] // :method first, as clients send it
	data := quicvarint.Append(quicvarint.Append(nil, h3ext.FrameData), 5)
	require.Equal(t, msgErr, streamCode(request(t, qc, post, append(data, "hello"...))), "5 octets of body for a length of 2")

	require.Equal(t, int64(-1), streamCode(request(t, qc, get("/"), nil)), "the connection still serves")
	hostOnly := []qpack.HeaderField{get("/")[0], get("/")[1], get("/")[3], {Name: "host", Value: "localhost"}}
	require.Equal(t, int64(-1), streamCode(request(t, qc, hostOnly, nil)), "Host stands for :authority")
}

// TestUnexpectedFramesEndTheConnection: a DATA frame before a
// request's HEADERS is H3_FRAME_UNEXPECTED, a connection error.
func TestUnexpectedFramesEndTheConnection(t *testing.T) {
	dial := serve(t, &Config{Handler: echo()})
	qc := dial()
	str, err := qc.OpenStreamSync(context.Background())
	require.NoError(t, err)
	str.Write([]byte{h3ext.FrameData, 1, 'x'})
	str.Close()
	require.Equal(t, quic.ApplicationErrorCode(http3.ErrCodeFrameUnexpected), connCode(t, qc))
}

// TestIdleTimeout: a connection with no request for IdleTimeout is
// closed with H3_NO_ERROR; one with a request in flight is not.
func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	dial := serve(t, &Config{IdleTimeout: 200 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	})})
	busy, idle := dial(), dial()
	request(t, busy, get("/"), nil)
	select {
	case <-idle.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection is still open")
	}
	require.NoError(t, busy.Context().Err(), "a request in flight keeps its connection")
	close(release)
}

func TestParsePriority(t *testing.T) {
	for v, want := range map[string]struct {
		u int8
		i bool
	}{
		"":             {3, false},
		"u=0":          {0, false},
		"u=5, i":       {5, true},
		"i=?1":         {3, true},
		"u=2, i=?0":    {2, false},
		"u=9":          {3, false},
		"u=1;x=2, foo": {1, false},
	} {
		u, i := parsePriority(v)
		require.Equal(t, want.u, u, v)
		require.Equal(t, want.i, i, v)
	}
}

// connCode is the application error code qc was closed with.
func connCode(t *testing.T, qc *quic.Conn) quic.ApplicationErrorCode {
	t.Helper()
	select {
	case <-qc.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection is still open")
	}
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(qc.Context()), &ae)
	return ae.ErrorCode
}

// uni opens a unidirectional stream of type typ and writes b on it;
// fin ends it.
func uni(t *testing.T, qc *quic.Conn, typ uint64, b []byte, fin bool) {
	t.Helper()
	str, err := qc.OpenUniStreamSync(context.Background())
	require.NoError(t, err)
	_, err = str.Write(append(quicvarint.Append(nil, typ), b...))
	require.NoError(t, err)
	if fin {
		str.Close()
	}
}

// frame is an HTTP/3 frame of typ with payload.
func frame(typ uint64, payload ...byte) []byte {
	return append(quicvarint.Append(quicvarint.Append(nil, typ), uint64(len(payload))), payload...)
}

// TestConnectionErrors: what RFC 9114 and RFC 9204 make connection
// errors ends the connection with its code, each case on raw streams.
func TestConnectionErrors(t *testing.T) {
	settings := h3ext.AppendSettings(nil, nil)
	post := append(get("/echo")[1:], qpack.HeaderField{Name: ":method", Value: "POST"})
	post[0], post[3] = post[3], post[0]
	for _, c := range []struct {
		name string
		do   func(qc *quic.Conn)
		code http3.ErrCode
	}{
		{"CANCEL_PUSH of a push never promised", func(qc *quic.Conn) {
			uni(t, qc, h3ext.StreamControl, append(settings, frame(h3ext.FrameCancelPush, 0)...), false)
		}, http3.ErrCodeIDError},
		{"a GOAWAY whose ID grows", func(qc *quic.Conn) {
			uni(t, qc, h3ext.StreamControl, slices.Concat(settings, frame(h3ext.FrameGoAway, 4), frame(h3ext.FrameGoAway, 8)), false)
		}, http3.ErrCodeIDError},
		{"a MAX_PUSH_ID that shrinks", func(qc *quic.Conn) {
			uni(t, qc, h3ext.StreamControl, slices.Concat(settings, frame(h3ext.FrameMaxPushID, 8), frame(h3ext.FrameMaxPushID, 4)), false)
		}, http3.ErrCodeIDError},
		{"an encoder instruction beyond capacity 0", func(qc *quic.Conn) {
			uni(t, qc, h3ext.StreamQPACKEncoder, []byte{0x20, 0x3f, 0x21}, false) // capacity 0 is fine; then 32 is not
		}, errCodeQPACKEncoderStream},
		{"an insert into a table of capacity 0", func(qc *quic.Conn) {
			uni(t, qc, h3ext.StreamQPACKEncoder, []byte{0xc0 | 17, 1, 'x'}, false)
		}, errCodeQPACKEncoderStream},
		{"the encoder stream's end", func(qc *quic.Conn) { uni(t, qc, h3ext.StreamQPACKEncoder, nil, true) }, http3.ErrCodeClosedCriticalStream},
		{"the decoder stream's end", func(qc *quic.Conn) { uni(t, qc, h3ext.StreamQPACKDecoder, nil, true) }, http3.ErrCodeClosedCriticalStream},
		{"a header block QPACK cannot decode", func(qc *quic.Conn) {
			str, err := qc.OpenStreamSync(context.Background())
			require.NoError(t, err)
			str.Write(frame(h3ext.FrameHeaders, 0x01, 0x00)) // a dynamic table reference
			str.Close()
		}, http3.ErrCodeQPACKDecompressionFailed},
		{"a DATA frame cut short by FIN", func(qc *quic.Conn) {
			request(t, qc, post, append(quicvarint.Append(quicvarint.Append(nil, h3ext.FrameData), 10), "hel"...))
		}, http3.ErrCodeFrameError},
	} {
		t.Run(c.name, func(t *testing.T) {
			qc := serve(t, &Config{Handler: echo()})()
			c.do(qc)
			require.Equal(t, quic.ApplicationErrorCode(c.code), connCode(t, qc))
		})
	}
}

// TestPriorityUpdateBeforeItsRequest: a PRIORITY_UPDATE for a request
// not yet open is held and applied when it opens, over the request's
// own Priority field (RFC 9218 §7.1); held ones are bounded.
func TestPriorityUpdateBeforeItsRequest(t *testing.T) {
	c := &Conn{streams: map[quic.StreamID]*quic.Stream{}, pending: map[quic.StreamID]priority{}}
	c.reprioritize(8, priority{1, true})
	p, ok := c.takePending(8)
	require.True(t, ok)
	require.Equal(t, priority{1, true}, p)
	_, ok = c.takePending(8)
	require.False(t, ok, "applied once")
	for i := range maxPending + 10 {
		c.reprioritize(quic.StreamID(4*i), priority{2, false})
	}
	require.Len(t, c.pending, maxPending)
	_, ok = c.takePending(0)
	require.False(t, ok, "the oldest went first")

	// End to end: the update, sent first, wins over the field.
	qc := serve(t, &Config{Handler: echo()})()
	uni(t, qc, h3ext.StreamControl, append(h3ext.AppendSettings(nil, nil), frame(h3ext.FramePriorityUpdate, append(quicvarint.Append(nil, 0), "u=0"...)...)...), false)
	time.Sleep(100 * time.Millisecond) // the control stream first
	str := request(t, qc, get("/", qpack.HeaderField{Name: "priority", Value: "u=7"}), nil)
	require.Equal(t, int64(-1), streamCode(str), "served")
}

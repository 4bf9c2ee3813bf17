package h3server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/h3ext"
)

// postEcho is a POST to /echo, with a content-length when cl is not "".
func postEcho(cl string) []qpack.HeaderField {
	f := []qpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: "localhost"}, {Name: ":path", Value: "/echo"}}
	if cl != "" {
		f = append(f, qpack.HeaderField{Name: "content-length", Value: cl})
	}
	return f
}

// readResponse reads a whole response off str: its status and body.
func readResponse(t *testing.T, str *quic.Stream) (status, body string) {
	t.Helper()
	str.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(str)
	require.NoError(t, err)
	r := bytes.NewReader(b)
	for r.Len() > 0 {
		typ, payload, err := h3ext.ReadFrame(r)
		require.NoError(t, err)
		switch typ {
		case h3ext.FrameHeaders:
			next := qpack.NewDecoder().Decode(payload)
			for f, err := next(); !errors.Is(err, io.EOF); f, err = next() {
				require.NoError(t, err)
				if f.Name == ":status" {
					status = f.Value
				}
			}
		case h3ext.FrameData:
			body += string(payload)
		}
	}
	return status, body
}

// TestRequestBodies: a request's body as a handler reads it, whatever
// frames carry it (RFC 9114 §4.1): several DATA frames, frames of
// reserved types between them (skipped, §9), trailers after them
// (read and dropped); and the body's malformations: shorter than its
// content-length (the stream reset H3_MESSAGE_ERROR), trailers past the
// header limit (H3_EXCESSIVE_LOAD), DATA after trailers (the connection
// closed, H3_FRAME_UNEXPECTED). Each bad stream leaves the connection
// serving others, but the last.
func TestRequestBodies(t *testing.T) {
	dial := serve(t, &Config{Handler: echo(), MaxHeaderBytes: 2000})
	qc := dial()
	grease := frame(0x1f*3+0x21, 'g', 'r', 'e', 'a', 's', 'e')
	trailers := func(size int) []byte {
		var block bytes.Buffer
		require.NoError(t, qpack.NewEncoder(&block).WriteField(qpack.HeaderField{Name: "x-trailer", Value: strings.Repeat("~", size)}))
		return frame(h3ext.FrameHeaders, block.Bytes()...)
	}

	status, got := readResponse(t, request(t, qc, postEcho("11"), slices.Concat(frame(h3ext.FrameData, []byte("hel")...), grease, frame(h3ext.FrameData), frame(h3ext.FrameData, []byte("lo world")...))))
	require.Equal(t, "200", status)
	require.Equal(t, `POST localhost HTTP/3.0 11 "" hello world`, got, "three DATA frames, an empty one and a reserved frame among them")

	status, got = readResponse(t, request(t, qc, postEcho(""), slices.Concat(frame(h3ext.FrameData, []byte("body")...), trailers(10))))
	require.Equal(t, "200", status)
	require.Equal(t, `POST localhost HTTP/3.0 -1 "" body`, got, "no length given; the trailers read and dropped")

	msgErr := int64(http3.ErrCodeMessageError)
	require.Equal(t, msgErr, streamCode(request(t, qc, postEcho("10"), frame(h3ext.FrameData, []byte("abc")...))), "3 octets of body for a length of 10")
	require.Equal(t, int64(http3.ErrCodeExcessiveLoad), streamCode(request(t, qc, postEcho(""), slices.Concat(frame(h3ext.FrameData, 'x'), trailers(3000)))), "trailers past the limit")
	status, _ = readResponse(t, request(t, qc, get("/"), nil))
	require.Equal(t, "200", status, "the connection still serves")

	request(t, qc, postEcho(""), slices.Concat(frame(h3ext.FrameData, 'x'), trailers(5), frame(h3ext.FrameData, []byte("late")...)))
	require.Equal(t, quic.ApplicationErrorCode(http3.ErrCodeFrameUnexpected), connCode(t, qc), "DATA after the trailers")
}

// TestBodyClosedEarly: a handler that closes a request's body before its
// end (an upload it does not want) reads nothing more from it
// (http.ErrBodyReadAfterClose), and the server asks the client to stop
// sending at once (STOP_SENDING, H3_NO_ERROR, RFC 9114 §4.1.1): the
// client's upload ends while the handler still runs, where it would
// otherwise stream on until the server's flow control window ran out,
// and the response comes whole.
func TestBodyClosedEarly(t *testing.T) {
	afterClose := make(chan error, 1)
	uploaded := make(chan error, 1)
	stoppedFirst := make(chan bool, 1) // a channel: the race detector cannot see the response's way back
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadFull(r.Body, make([]byte, 4))
		r.Body.Close()
		_, err := r.Body.Read(make([]byte, 1))
		afterClose <- err
		select { // the handler runs on until the upload has stopped
		case err := <-uploaded:
			stoppedFirst <- err != nil
		case <-time.After(5 * time.Second):
			stoppedFirst <- false
		}
		io.WriteString(w, "enough")
	})
	cc := (&http3.Transport{}).NewClientConn(serve(t, &Config{Handler: h})())
	body, upload := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("u"), 1024)
		for range 100_000 { // 100 MB: more than any window holds
			if _, err := upload.Write(chunk); err != nil {
				uploaded <- err
				return
			}
		}
		uploaded <- nil
	}()
	req, _ := http.NewRequest(http.MethodPost, "https://localhost/upload", body)
	resp, err := cc.RoundTrip(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	upload.Close()
	require.NoError(t, err)
	require.Equal(t, "enough", string(got))
	require.ErrorIs(t, <-afterClose, http.ErrBodyReadAfterClose)
	require.True(t, <-stoppedFirst, "the upload stopped while the handler ran")
}

package bench

import (
	"bytes"
	"io"
	"testing"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go/quicvarint"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/transport"
)

// h3Frame is an HTTP/3 frame of type t.
func h3Frame(t uint64, payload []byte) []byte {
	b := quicvarint.Append(quicvarint.Append(nil, t), uint64(len(payload)))
	return append(b, payload...)
}

// h3Headers is a HEADERS frame of the fields, QPACK-encoded.
func h3Headers(t *testing.T, kv ...string) []byte {
	t.Helper()
	var block bytes.Buffer
	enc := qpack.NewEncoder(&block)
	for i := 0; i < len(kv); i += 2 {
		require.NoError(t, enc.WriteField(qpack.HeaderField{Name: kv[i], Value: kv[i+1]}))
	}
	return h3Frame(h3FrameHeaders, block.Bytes())
}

// TestReadH3Response: what the lean DoH/3 reader makes of each response
// a server may send on a request stream (RFC 9114 §4.1): the final
// status past interim ones, the body of several DATA frames, trailers
// and frames of unknown types (§9) skipped; and each malformed one
// refused as malformed, never read past a DNS message's worth.
func TestReadH3Response(t *testing.T) {
	ok := h3Headers(t, ":status", "200", "content-type", "application/dns-message")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range []struct {
		name   string
		stream []byte
		status int
		body   string
		err    transport.Status // "" none
	}{
		{"an answer", cat(ok, h3Frame(h3FrameData, []byte("answer"))), 200, "answer", ""},
		{"in three DATA frames", cat(ok, h3Frame(h3FrameData, []byte("an")), h3Frame(h3FrameData, nil), h3Frame(h3FrameData, []byte("swer"))), 200, "answer", ""},
		{"interim responses first", cat(h3Headers(t, ":status", "103", "link", "</x>"), h3Headers(t, ":status", "100"), ok, h3Frame(h3FrameData, []byte("answer"))), 200, "answer", ""},
		{"trailers after", cat(ok, h3Frame(h3FrameData, []byte("answer")), h3Headers(t, "grpc-status", "0")), 200, "answer", ""},
		{"unknown and reserved frames", cat(h3Frame(0x21, []byte("grease")), ok, h3Frame(0x1f*7+0x21, make([]byte, 300)), h3Frame(h3FrameData, []byte("answer"))), 200, "answer", ""},
		{"an error status and its body", cat(h3Headers(t, ":status", "503"), h3Frame(h3FrameData, []byte("busy"))), 503, "busy", ""},
		{"a status without a body", ok, 200, "", ""},
		{"nothing", nil, 0, "", transport.StatusClosed},
		{"no :status", cat(h3Headers(t, "content-type", "application/dns-message"), h3Frame(h3FrameData, []byte("answer"))), 0, "", transport.StatusMalformed},
		{"only an interim response", h3Headers(t, ":status", "103"), 0, "", transport.StatusClosed},
		{"interim responses without end", bytes.Repeat(h3Headers(t, ":status", "103"), 6), 0, "", transport.StatusMalformed},
		{"101 is final, and no answer", cat(h3Headers(t, ":status", "101"), ok), 101, "", ""},
		{"DATA before HEADERS", cat(h3Frame(h3FrameData, []byte("answer")), ok), 0, "", transport.StatusMalformed},
		{"a body past a DNS message", cat(ok, h3Frame(h3FrameData, make([]byte, 40000)), h3Frame(h3FrameData, make([]byte, 40000))), 0, "", transport.StatusMalformed},
		{"a frame claiming 2^40 octets", cat(ok, quicvarint.Append(quicvarint.Append(nil, h3FrameData), 1<<40)), 0, "", transport.StatusMalformed},
		{"cut in a frame", cat(ok, h3Frame(h3FrameData, []byte("answer"))[:5]), 0, "", transport.StatusClosed},
		{"cut in a length", cat(ok, []byte{h3FrameData, 0x80}), 0, "", transport.StatusClosed},
		{"QPACK that does not decode", h3Frame(h3FrameHeaders, []byte{0, 0, 0xff, 0xff, 0xff}), 0, "", transport.StatusMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, err := readH3Response(bytes.NewReader(c.stream))
			if c.err != "" {
				require.Error(t, err)
				require.Equal(t, c.err, transport.Classify(err), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.status, status)
			require.Equal(t, c.body, string(body))
		})
	}
}

// FuzzReadH3Response: whatever a server sends on a request stream, the
// reader returns a status of a final response with at most a DNS
// message's body, or an error; it never panics.
func FuzzReadH3Response(f *testing.F) {
	f.Add([]byte{})
	f.Add(h3Frame(h3FrameData, []byte("x")))
	f.Add(append(h3Frame(h3FrameHeaders, []byte{0, 0, 0xd9}), h3Frame(h3FrameData, []byte("answer"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		status, body, err := readH3Response(io.LimitReader(bytes.NewReader(b), 1<<20))
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, status, 200)
		require.LessOrEqual(t, len(body), dnswire.MaxMsg)
	})
}

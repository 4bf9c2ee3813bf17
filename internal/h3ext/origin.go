// Package h3ext holds the HTTP/3 wire formats doxlab's own HTTP/3
// layers read and write: frames, SETTINGS, and the ORIGIN frame (RFC
// 9412, RFC 8336's semantics) that the server sends on its control
// stream.
package h3ext

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/quic-go/quic-go/quicvarint"
)

// FrameOrigin is the ORIGIN frame's type in HTTP/3 (RFC 9412 §2).
const FrameOrigin = 0x0c

// MaxFrame bounds a frame's payload read from a peer.
const MaxFrame = 16 << 10

// ErrFrame is a frame that breaks its framing (H3_FRAME_ERROR).
var ErrFrame = errors.New("malformed HTTP/3 frame")

// AppendOrigin appends an ORIGIN frame announcing origins, each an
// ASCII serialization such as https://example.org or
// https://example.org:8443.
func AppendOrigin(dst []byte, origins []string) ([]byte, error) {
	payload, err := OriginEntries(origins)
	if err != nil {
		return nil, err
	}
	dst = quicvarint.Append(dst, FrameOrigin)
	dst = quicvarint.Append(dst, uint64(len(payload)))
	return append(dst, payload...), nil
}

// OriginEntries is the payload of an ORIGIN frame, the same in HTTP/2
// (RFC 8336) and HTTP/3 (RFC 9412): per origin a 16-bit length and its
// ASCII serialization.
func OriginEntries(origins []string) ([]byte, error) {
	var payload []byte
	for _, o := range origins {
		if len(o) > 0xffff {
			return nil, fmt.Errorf("origin %.40q… is longer than 65535 octets", o)
		}
		payload = append(payload, byte(len(o)>>8), byte(len(o)))
		payload = append(payload, o...)
	}
	return payload, nil
}

// H2Origin is an HTTP/2 ORIGIN frame (RFC 8336 §2): type 0xc on stream
// 0, no flags, announcing origins. It fits one frame of the default
// maximum size (16,384 octets) or is an error.
func H2Origin(origins []string) ([]byte, error) {
	payload, err := OriginEntries(origins)
	if err != nil {
		return nil, err
	}
	if len(payload) > 16384 {
		return nil, fmt.Errorf("%d origins take %d octets, over one HTTP/2 frame's 16384", len(origins), len(payload))
	}
	hdr := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), 0x0c, 0, 0, 0, 0, 0}
	return append(hdr, payload...), nil
}

// ReadFrame reads one HTTP/3 frame: its type and payload. A payload
// over MaxFrame is an error, read no further.
func ReadFrame(r quicvarint.Reader) (typ uint64, payload []byte, err error) {
	typ, n, err := ReadFrameHeader(r)
	if err != nil {
		return 0, nil, err
	}
	payload, err = ReadPayload(r, n)
	return typ, payload, err
}

// ReadFrameHeader reads a frame's type and length. A stream that ends
// before the type gives io.EOF; one that ends inside them is a frame
// error.
func ReadFrameHeader(r quicvarint.Reader) (typ, n uint64, err error) {
	if typ, err = quicvarint.Read(r); err != nil {
		return 0, 0, err
	}
	if n, err = quicvarint.Read(r); err != nil {
		return 0, 0, fmt.Errorf("%w: no length: %w", ErrFrame, noEOF(err))
	}
	return typ, n, nil
}

// ReadPayload reads a frame's payload of n octets, at most MaxFrame.
func ReadPayload(r io.Reader, n uint64) ([]byte, error) {
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: a %d-octet frame", ErrFrame, n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, fmt.Errorf("%w: cut short: %w", ErrFrame, noEOF(err))
	}
	return payload, nil
}

// Skip discards a frame's payload of n octets, whatever its length: a
// frame the reader does not know (RFC 9114 §9). The stream's deadline
// bounds the time it takes.
func Skip(r io.Reader, n uint64) error {
	k, err := io.CopyN(io.Discard, r, int64(min(n, 1<<62)))
	if err != nil || uint64(k) < n {
		return fmt.Errorf("%w: cut short: %w", ErrFrame, noEOF(cmp.Or(err, io.ErrUnexpectedEOF)))
	}
	return nil
}

// noEOF turns an end of stream inside a frame into io.ErrUnexpectedEOF,
// so that only a stream that ends between frames reads as io.EOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ParseOrigin reads an ORIGIN frame's payload: its Origin-Entries, the
// valid ones normalized (RFC 8336 §2.3: an entry that is not a valid
// ASCII serialization of an origin is ignored). Entries that run past
// the payload are a frame error.
func ParseOrigin(payload []byte) ([]string, error) {
	var out []string
	for len(payload) > 0 {
		if len(payload) < 2 {
			return out, fmt.Errorf("%w: an Origin-Entry's length cut short", ErrFrame)
		}
		n := int(payload[0])<<8 | int(payload[1])
		if len(payload) < 2+n {
			return out, fmt.Errorf("%w: an Origin-Entry of %d octets in %d", ErrFrame, n, len(payload)-2)
		}
		if o, ok := NormalizeOrigin(string(payload[2 : 2+n])); ok {
			out = append(out, o)
		}
		payload = payload[2+n:]
	}
	return out, nil
}

// NormalizeOrigin returns an https origin's ASCII serialization, its
// host in lower case and the default port left out, or false.
func NormalizeOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && p != "443" {
		host += ":" + p
	}
	return "https://" + host, true
}

// Origin is the origin of https://host:port, as NormalizeOrigin writes it.
func Origin(host string, port int) string {
	o, _ := NormalizeOrigin(fmt.Sprintf("https://%s:%d", bracket(host), port))
	return o
}

func bracket(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// Peeker looks at a stream's next octets without consuming them, as
// quic-go's streams do.
type Peeker interface {
	Peek(b []byte) (int, error)
}

// PeekVarint reads the QUIC variable-length integer a stream starts
// with (a stream's type, a frame's type) without consuming it, and its
// length. A stream that ends inside it gives io.EOF.
func PeekVarint(p Peeker) (v uint64, n int, err error) {
	var b [8]byte
	if _, err := p.Peek(b[:1]); err != nil {
		return 0, 0, err
	}
	n = 1 << (b[0] >> 6) // the length is in the first two bits
	if k, err := p.Peek(b[:n]); err != nil {
		if errors.Is(err, io.EOF) && k < n {
			return 0, 0, io.EOF
		}
		return 0, 0, err
	}
	v, _, err = quicvarint.Parse(b[:n])
	return v, n, err
}

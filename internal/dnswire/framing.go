// Package dnswire holds the DNS framing both doxlab's clients and its
// server speak: the 2-octet length prefix of TCP, DoT and DoQ, and the DoH
// request and answer forms (RFC 8484 and the JSON API).
package dnswire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxMsg is the largest DNS message any transport can carry: the 2-octet
// length prefix of TCP, DoT and DoQ (RFC 1035 §4.2.2, RFC 9250 §4.2).
const MaxMsg = 65535

// MinMsg is a DNS header; anything shorter cannot be a message.
const MinMsg = 12

// ErrMalformed marks a peer that broke the protocol: bad framing, a
// message that does not parse, or an answer to a question not asked.
var ErrMalformed = errors.New("malformed")

// Malformed returns an ErrMalformed with details.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// AppendPrefixed appends msg with its 2-octet length prefix.
func AppendPrefixed(dst, msg []byte) ([]byte, error) {
	if len(msg) > MaxMsg {
		return dst, fmt.Errorf("message of %d octets exceeds %d", len(msg), MaxMsg)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...), nil
}

// ReadPrefixed reads one length-prefixed message. A stream that ends
// inside a message, or a length too short for a DNS header, is malformed;
// a clean end before the prefix is io.EOF.
func ReadPrefixed(r io.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, Malformed("stream ended inside the length prefix")
		}
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n < MinMsg {
		return nil, Malformed("length prefix %d is shorter than a DNS header", n)
	}
	msg := make([]byte, n)
	if got, err := io.ReadFull(r, msg); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, Malformed("stream ended %d octets into a %d-octet message", got, n)
		}
		return nil, err
	}
	return msg, nil
}

// DoQPrefixed says whether a DoQ ALPN frames messages with a length. The
// drafts before -04 sent the bare message and ended the stream instead.
func DoQPrefixed(alpn string) bool {
	n, ok := strings.CutPrefix(alpn, "doq-i")
	if !ok {
		return true
	}
	v, err := strconv.Atoi(n)
	return err != nil || v >= 4
}

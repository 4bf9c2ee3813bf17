package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxMsg is the largest DNS message any transport can carry: the 2-octet
// length prefix of TCP, DoT and DoQ (RFC 1035 §4.2.2, RFC 9250 §4.2).
const maxMsg = 65535

// minMsg is a DNS header; anything shorter cannot be a message.
const minMsg = 12

// appendPrefixed appends msg with its 2-octet length prefix.
func appendPrefixed(dst, msg []byte) ([]byte, error) {
	if len(msg) > maxMsg {
		return dst, fmt.Errorf("message of %d octets exceeds %d", len(msg), maxMsg)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...), nil
}

// readPrefixed reads one length-prefixed message. A stream that ends
// inside a message, or a length too short for a DNS header, is malformed;
// a clean end before the prefix is io.EOF.
func readPrefixed(r io.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, malformed("stream ended inside the length prefix")
		}
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n < minMsg {
		return nil, malformed("length prefix %d is shorter than a DNS header", n)
	}
	msg := make([]byte, n)
	if got, err := io.ReadFull(r, msg); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, malformed("stream ended %d octets into a %d-octet message", got, n)
		}
		return nil, err
	}
	return msg, nil
}

package dnswire

import (
	"errors"
	"io"

	"github.com/quic-go/quic-go/quicvarint"

	"github.com/doxlab/doxlab/internal/h3ext"
)

// A DNS stream carries one DNS exchange on an HTTP/3 connection, framed
// as DoQ frames it (RFC 9250 §4.2), with no HTTP header octets: the
// "DoQ and HTTP/3 on one connection" the cross-layer paper's Fig. 1b
// draws, which one ALPN per connection otherwise forbids. docs/dnsstream.md
// is the specification.
//
// The server offers it with the SETTINGS parameter DNSStreamSetting = 1.
// The client opens a bidirectional stream and writes DNSStreamSignal as a
// variable-length integer where a request stream's first frame type
// would be (as WebTransport's signal value does), then one query with a
// 2-octet length prefix, then FIN. The server answers with one prefixed
// response and FIN.
const (
	DNSStreamSetting = 0xd0c0
	DNSStreamSignal  = 0xd0c0
)

// AppendDNSStreamQuery appends a DNS stream's whole client side for msg:
// the signal and the prefixed query.
func AppendDNSStreamQuery(dst, msg []byte) ([]byte, error) {
	return AppendPrefixed(quicvarint.Append(dst, DNSStreamSignal), msg)
}

// IsDNSStream reports whether a bidirectional stream on an HTTP/3
// connection starts with the DNS stream signal, without consuming
// anything: a request stream is handed on to HTTP/3 untouched. It blocks
// until the first variable-length integer has arrived.
func IsDNSStream(p h3ext.Peeker) (bool, error) {
	v, _, err := h3ext.PeekVarint(p)
	if errors.Is(err, io.EOF) {
		return false, nil // too short to be the signal: HTTP/3's to reject
	}
	return err == nil && v == DNSStreamSignal, err
}

// SkipDNSStreamSignal consumes the signal IsDNSStream found.
func SkipDNSStreamSignal(r io.Reader) error {
	_, err := io.ReadFull(r, make([]byte, quicvarint.Len(DNSStreamSignal)))
	return err
}

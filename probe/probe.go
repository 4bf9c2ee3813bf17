// Package probe measures round-trip times on the same port and protocol
// a DNS transport uses, as the PAM 2022 paper does next to each response
// time: a UDP datagram answered by the DNS server, a TCP SYN answered by
// SYN-ACK, and a QUIC Initial with an unsupported version answered by a
// Version Negotiation packet. No probe opens a session a server must keep.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/protocol"
)

// Result is one probe.
type Result struct {
	Kind   string        `json:"kind"` // udp, tcp or quic
	Target string        `json:"target"`
	RTT    time.Duration `json:"rtt_ns"`
	// Versions are the QUIC versions a Version Negotiation listed.
	Versions []uint32 `json:"versions,omitempty"`
}

// RTTMs is the RTT in milliseconds with microsecond precision.
func (r Result) RTTMs() float64 { return float64(r.RTT.Microseconds()) / 1000 }

// ReservedVersion is a QUIC version no server supports (RFC 9000 §15
// reserves 0x?a?a?a?a to force Version Negotiation).
const ReservedVersion uint32 = 0x1a2a3a4a

// ErrNoAnswer is a probe that got nothing back before the deadline.
var ErrNoAnswer = errors.New("no answer")

// ForScheme returns the probe for a server URL's scheme, from the
// protocol table: UDP for plain datagrams (udp://), QUIC for the
// protocols over QUIC (quic://, h3://), TCP for the rest.
func ForScheme(scheme string) func(context.Context, string) (Result, error) {
	p, ok := protocol.ForScheme(scheme)
	switch {
	case ok && p.Datagram && p.Scheme == "udp":
		return UDP
	case ok && p.Datagram:
		return QUIC
	}
	return TCP
}

// UDP sends a DNS message with no question (a header alone) to a DNS
// server's UDP port and times the answer, which is normally FORMERR. The
// socket is connected, so a closed port fails at once with ECONNREFUSED.
func UDP(ctx context.Context, addr string) (Result, error) {
	msg := make([]byte, 12)
	rand.Read(msg[:2]) // ID; all counts zero
	return datagram(ctx, "udp", addr, msg, func(b []byte) bool { return len(b) >= 12 && b[0] == msg[0] && b[1] == msg[1] })
}

// TCP times a three-way handshake and resets the connection at once, so
// the server's DNS or TLS code never sees a session.
func TCP(ctx context.Context, addr string) (Result, error) {
	var d net.Dialer
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", addr)
	rtt := time.Since(start)
	if err != nil {
		return Result{}, fmt.Errorf("TCP probe %s: %w", addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) // RST instead of FIN
	}
	c.Close()
	return Result{Kind: "tcp", Target: addr, RTT: rtt}, nil
}

// QUIC sends an Initial-shaped packet with ReservedVersion, padded to the
// 1200 octets a server requires before answering (RFC 9000 §14.1), and
// times the Version Negotiation packet, returning the versions it lists.
func QUIC(ctx context.Context, addr string) (Result, error) {
	pkt, dcid, scid := VNProbe()
	var versions []uint32
	match := func(b []byte) bool {
		v, err := ParseVN(b, dcid, scid)
		if err != nil {
			return false
		}
		versions = v
		return true
	}
	r, err := datagram(ctx, "quic", addr, pkt, match)
	r.Versions = versions
	return r, err
}

// VNProbe builds the probe packet and returns the connection IDs it uses,
// which the Version Negotiation packet echoes swapped. Scanners (ZMap's
// UDP module) can send these bytes as they are.
func VNProbe() (pkt, dcid, scid []byte) {
	dcid, scid = make([]byte, 8), make([]byte, 8)
	rand.Read(dcid)
	rand.Read(scid)
	return VNProbeWith(dcid, scid), dcid, scid
}

// VNProbeWith builds the probe with the given 8-octet connection IDs.
func VNProbeWith(dcid, scid []byte) []byte {
	pkt := make([]byte, 1200)
	pkt[0] = 0xc0 // long header, fixed bit, type Initial
	binary.BigEndian.PutUint32(pkt[1:], ReservedVersion)
	pkt[5] = byte(len(dcid))
	copy(pkt[6:], dcid)
	pkt[14] = byte(len(scid))
	copy(pkt[15:], scid)
	// The rest stays zero: a server cannot parse past the version it does
	// not know, and padding is all it checks.
	return pkt
}

// ParseVN checks that b is a Version Negotiation packet answering a probe
// with the given connection IDs (RFC 9000 §17.2.1) and returns its versions.
func ParseVN(b, dcid, scid []byte) ([]uint32, error) {
	if len(b) < 7 || b[0]&0x80 == 0 || binary.BigEndian.Uint32(b[1:]) != 0 {
		return nil, errors.New("not a Version Negotiation packet")
	}
	i := 5
	readCID := func() ([]byte, error) {
		if i >= len(b) {
			return nil, errors.New("truncated")
		}
		n := int(b[i])
		if i+1+n > len(b) {
			return nil, errors.New("truncated connection ID")
		}
		cid := b[i+1 : i+1+n]
		i += 1 + n
		return cid, nil
	}
	gotD, err := readCID()
	if err != nil {
		return nil, err
	}
	gotS, err := readCID()
	if err != nil {
		return nil, err
	}
	// The server's destination is our source and the other way round.
	if string(gotD) != string(scid) || string(gotS) != string(dcid) {
		return nil, errors.New("connection IDs do not match the probe")
	}
	rest := b[i:]
	if len(rest) == 0 || len(rest)%4 != 0 {
		return nil, errors.New("bad version list")
	}
	var vs []uint32
	for ; len(rest) >= 4; rest = rest[4:] {
		v := binary.BigEndian.Uint32(rest)
		if v == ReservedVersion {
			// RFC 9000 §6.2: a client MUST discard a Version Negotiation
			// packet that lists the version it chose.
			return nil, errors.New("the version list holds the probe's own version")
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// datagram sends pkt on a connected UDP socket and waits for an answer
// that match accepts, timing from just before the send to the read.
func datagram(ctx context.Context, kind, addr string, pkt []byte, match func([]byte) bool) (Result, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return Result{}, fmt.Errorf("%s probe %s: %w", kind, addr, err)
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(3 * time.Second)
	}
	c.SetReadDeadline(deadline)
	buf := make([]byte, 2048)
	start := time.Now()
	if _, err := c.Write(pkt); err != nil {
		return Result{}, fmt.Errorf("%s probe %s: %w", kind, addr, err)
	}
	for {
		n, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return Result{}, fmt.Errorf("%s probe %s: %w", kind, addr, ErrNoAnswer)
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				return Result{}, fmt.Errorf("%s probe %s: %w", kind, addr, err)
			}
			return Result{}, fmt.Errorf("%s probe %s: %w", kind, addr, err)
		}
		if match(buf[:n]) {
			return Result{Kind: kind, Target: addr, RTT: time.Since(start)}, nil
		}
	}
}

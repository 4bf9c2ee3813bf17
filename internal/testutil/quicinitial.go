package testutil

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
)

// What the network sees of a QUIC client's ClientHello: its Initial
// packets are encrypted with keys anyone derives from the connection ID
// they carry (RFC 9001 §5.2), so an observer reads the ClientHello as it
// reads TLS's over TCP. A test that a name is not sent in clear over
// HTTP/3 decrypts them as an observer would.

// ClientHello is what a QUIC client's first flight said in clear.
type ClientHello struct {
	SNI string // the server name in clear (with ECH, the outer one)
	ECH bool   // an encrypted_client_hello extension was sent
	Raw []byte // the ClientHello, its handshake header included
}

// initialSaltV1 is QUIC version 1's Initial salt (RFC 9001 §5.2).
var initialSaltV1 = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a}

// ReadClientHello decrypts the client's Initial packets among datagrams
// (what it sent to one server, in order) and reads its ClientHello.
func ReadClientHello(datagrams [][]byte) (*ClientHello, error) {
	var aead cipher.AEAD
	var hp cipher.Block
	var iv []byte
	crypto := map[uint64][]byte{}
	for _, d := range datagrams {
		for p := d; len(p) > 0 && p[0]&0x80 != 0; {
			pkt, err := parseLong(p)
			if err != nil {
				return nil, err
			}
			p = p[pkt.end:]
			if pkt.version != 1 || pkt.kind != 0 { // Initial packets of QUIC v1 alone
				continue
			}
			if aead == nil { // the first Initial's destination ID keys them all
				if aead, hp, iv, err = initialKeys(pkt.dcid); err != nil {
					return nil, err
				}
			}
			plain, err := pkt.open(aead, hp, iv)
			if err != nil {
				return nil, err
			}
			if err := cryptoFrames(plain, crypto); err != nil {
				return nil, err
			}
		}
	}
	var stream []byte
	for {
		b, ok := crypto[uint64(len(stream))]
		if !ok {
			break
		}
		stream = append(stream, b...)
	}
	return parseClientHello(stream)
}

func initialKeys(dcid []byte) (cipher.AEAD, cipher.Block, []byte, error) {
	initial, err := hkdf.Extract(sha256.New, dcid, initialSaltV1)
	if err != nil {
		return nil, nil, nil, err
	}
	client := expandLabel(initial, "client in", 32)
	block, err := aes.NewCipher(expandLabel(client, "quic key", 16))
	if err != nil {
		return nil, nil, nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil, nil, err
	}
	hp, err := aes.NewCipher(expandLabel(client, "quic hp", 16))
	return aead, hp, expandLabel(client, "quic iv", 12), err
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context.
func expandLabel(secret []byte, label string, n int) []byte {
	info := []byte{byte(n >> 8), byte(n), byte(6 + len(label))}
	info = append(append(info, "tls13 "+label...), 0)
	out, _ := hkdf.Expand(sha256.New, secret, string(info), n)
	return out
}

// longPacket is a long-header packet's parts.
type longPacket struct {
	raw           []byte
	version       uint32
	kind          byte // 0 Initial, 1 0-RTT, 2 Handshake, 3 Retry
	dcid          []byte
	pnOffset, end int
}

func parseLong(p []byte) (*longPacket, error) {
	bad := errors.New("quic: a long header cut short")
	if len(p) < 7 {
		return nil, bad
	}
	pkt := &longPacket{raw: p, version: binary.BigEndian.Uint32(p[1:5]), kind: p[0] >> 4 & 3}
	i := 5
	dl := int(p[i])
	if i += 1 + dl; i >= len(p) {
		return nil, bad
	}
	pkt.dcid = p[6 : 6+dl]
	i += 1 + int(p[i]) // the source ID
	if pkt.kind == 3 { // Retry: no length, the rest of the datagram
		pkt.end = len(p)
		return pkt, nil
	}
	if pkt.kind == 0 { // the token
		n, w := varint(p[min(i, len(p)):])
		if w == 0 {
			return nil, bad
		}
		i += w + int(n)
	}
	n, w := varint(p[min(i, len(p)):])
	if w == 0 {
		return nil, bad
	}
	pkt.pnOffset, pkt.end = i+w, i+w+int(n)
	if pkt.end > len(p) || pkt.pnOffset+20 > pkt.end {
		return nil, bad
	}
	return pkt, nil
}

// open removes header protection and decrypts the payload.
func (pkt *longPacket) open(aead cipher.AEAD, hp cipher.Block, iv []byte) ([]byte, error) {
	p := append([]byte(nil), pkt.raw[:pkt.end]...)
	mask := make([]byte, 16)
	hp.Encrypt(mask, p[pkt.pnOffset+4:pkt.pnOffset+20])
	p[0] ^= mask[0] & 0x0f
	pnLen := int(p[0]&3) + 1
	var pn uint64
	for j := range pnLen {
		p[pkt.pnOffset+j] ^= mask[1+j]
		pn = pn<<8 | uint64(p[pkt.pnOffset+j])
	}
	nonce := append([]byte(nil), iv...)
	for k := range 8 {
		nonce[len(nonce)-1-k] ^= byte(pn >> (8 * k))
	}
	hdr := pkt.pnOffset + pnLen
	plain, err := aead.Open(nil, nonce, p[hdr:], p[:hdr])
	if err != nil {
		return nil, fmt.Errorf("quic: an Initial packet does not decrypt with its keys: %w", err)
	}
	return plain, nil
}

// cryptoFrames adds the CRYPTO frames of an Initial's payload to c, by
// offset (a client may send them out of order, as Chromium does).
func cryptoFrames(p []byte, c map[uint64][]byte) error {
	next := func() uint64 {
		v, w := varint(p)
		if w == 0 {
			p = nil
			return 0
		}
		p = p[w:]
		return v
	}
	for len(p) > 0 {
		switch t := next(); t {
		case 0x00, 0x01: // PADDING, PING
		case 0x02, 0x03: // ACK
			next()
			next()
			ranges := next()
			next()
			for range 2 * ranges {
				next()
			}
			if t == 0x03 {
				next()
				next()
				next()
			}
		case 0x06: // CRYPTO
			off, n := next(), next()
			if n > uint64(len(p)) {
				return errors.New("quic: a CRYPTO frame cut short")
			}
			c[off] = append([]byte(nil), p[:n]...)
			p = p[n:]
		case 0x1c: // CONNECTION_CLOSE
			return nil
		default:
			return fmt.Errorf("quic: frame type %#x in an Initial packet", t)
		}
	}
	return nil
}

// varint reads a QUIC variable-length integer: its value and width, 0
// when cut short.
func varint(p []byte) (uint64, int) {
	if len(p) == 0 {
		return 0, 0
	}
	w := 1 << (p[0] >> 6)
	if len(p) < w {
		return 0, 0
	}
	v := uint64(p[0] & 0x3f)
	for _, b := range p[1:w] {
		v = v<<8 | uint64(b)
	}
	return v, w
}

// parseClientHello reads the server name and whether ECH was offered.
func parseClientHello(m []byte) (*ClientHello, error) {
	bad := errors.New("quic: the CRYPTO stream holds no whole ClientHello")
	if len(m) < 4 || m[0] != 1 {
		return nil, bad
	}
	n := int(m[1])<<16 | int(m[2])<<8 | int(m[3])
	if len(m) < 4+n {
		return nil, bad
	}
	ch := &ClientHello{Raw: m[:4+n]}
	b := m[4 : 4+n]
	skip := func(k int) bool {
		if len(b) < k {
			return false
		}
		b = b[k:]
		return true
	}
	vec := func(lenBytes int) bool { // skip a vector with a length of lenBytes
		if len(b) < lenBytes {
			return false
		}
		k := 0
		for _, x := range b[:lenBytes] {
			k = k<<8 | int(x)
		}
		return skip(lenBytes + k)
	}
	if !skip(2+32) || !vec(1) || !vec(2) || !vec(1) || len(b) < 2 {
		return nil, bad
	}
	b = b[2:]
	for len(b) >= 4 {
		typ, k := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+k {
			return nil, bad
		}
		ext := b[4 : 4+k]
		switch typ {
		case 0x0000: // server_name: list<2>, type 0, name<2>
			if len(ext) >= 5 && ext[2] == 0 {
				if l := int(binary.BigEndian.Uint16(ext[3:])); len(ext) >= 5+l {
					ch.SNI = string(ext[5 : 5+l])
				}
			}
		case 0xfe0d: // encrypted_client_hello
			ch.ECH = true
		}
		b = b[4+k:]
	}
	return ch, nil
}

// UDPWire is a UDP relay on loopback that keeps the datagrams clients
// send: what the network between a QUIC client and a server sees.
type UDPWire struct {
	mu   sync.Mutex
	sent map[string][][]byte // by client address
	conn *net.UDPConn
}

// RelayUDP relays 127.0.0.1:port to to until the test ends, an upstream
// socket per client.
func RelayUDP(t testing.TB, port int, to string) *UDPWire {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	must(t, err)
	up, err := net.ResolveUDPAddr("udp", to)
	must(t, err)
	w := &UDPWire{sent: map[string][][]byte{}, conn: c}
	t.Cleanup(func() { c.Close() })
	go func() {
		upstream := map[string]*net.UDPConn{}
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				for _, u := range upstream {
					u.Close()
				}
				return
			}
			w.mu.Lock()
			if len(w.sent[from.String()]) < 64 {
				w.sent[from.String()] = append(w.sent[from.String()], append([]byte(nil), buf[:n]...))
			}
			w.mu.Unlock()
			u := upstream[from.String()]
			if u == nil {
				if u, err = net.DialUDP("udp", nil, up); err != nil {
					continue
				}
				upstream[from.String()] = u
				go func(u *net.UDPConn, to *net.UDPAddr) { // the server's answers back
					b := make([]byte, 65536)
					for {
						n, err := u.Read(b)
						if err != nil {
							return
						}
						c.WriteToUDP(b[:n], to)
					}
				}(u, from)
			}
			u.Write(buf[:n])
		}
	}()
	return w
}

// Clients are what each client sent, its first 64 datagrams, in order.
func (w *UDPWire) Clients() [][][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out [][][]byte
	for _, d := range w.sent {
		out = append(out, d)
	}
	return out
}

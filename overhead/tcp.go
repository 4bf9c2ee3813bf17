package overhead

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxGap bounds how far past the stream's end a segment may start (or a
// QUIC frame's offset lie) and still be placed in it.
const maxGap = 1 << 20

// tcpConn reassembles each direction's byte stream and remembers which
// stream octets each packet carried.
type tcpConn struct {
	isn    [2]uint32
	hasISN [2]bool
	data   [2][]byte
	segs   []seg
}

type seg struct {
	pkt        *Packet
	dir        int
	start, len int
}

func dirOf(fromClient bool) int {
	if fromClient {
		return 0
	}
	return 1
}

func (t *tcpConn) add(pkt *Packet, p *ipPacket, fromClient bool) {
	d := dirOf(fromClient)
	if p.syn {
		t.isn[d], t.hasISN[d] = p.seq, true
	}
	if len(p.payload) == 0 {
		return
	}
	if !t.hasISN[d] { // capture started mid-connection: count from here
		t.isn[d], t.hasISN[d] = p.seq-1, true
	}
	off := int(p.seq - t.isn[d] - 1)
	if off < 0 || off > len(t.data[d])+maxGap {
		// Before the stream, or far beyond it (a capture gap, or not a
		// stream at all): counted, not placed.
		pkt.Layers[Undecrypted] += int64(len(p.payload))
		return
	}
	if need := off + len(p.payload); need > len(t.data[d]) {
		t.data[d] = append(t.data[d], make([]byte, need-len(t.data[d]))...)
	}
	copy(t.data[d][off:], p.payload)
	t.segs = append(t.segs, seg{pkt, d, off, len(p.payload)})
}

func (t *tcpConn) attribute(c *Conn, kl KeyLog) {
	var labels [2][]Layer
	switch c.App {
	case "dns":
		for d := range 2 {
			labels[d] = make([]Layer, len(t.data[d]))
			fill(labels[d], 0, len(labels[d]), DNS)
		}
	default:
		labels, c.Decrypted = tlsLabels(t.data, kl, c.App)
		if b := t.data[0]; len(b) > 5 && b[0] == 22 { // a handshake record: the ClientHello
			c.SNI = serverName(b[5:])
		}
	}
	seen := [2][]bool{make([]bool, len(t.data[0])), make([]bool, len(t.data[1]))}
	for _, s := range t.segs {
		count(s.pkt, labels[s.dir][s.start:s.start+s.len], seen[s.dir][s.start:s.start+s.len])
	}
}

// tlsLabels walks both directions' TLS records, decrypting TLS 1.3 with
// the logged secrets, and labels every stream octet.
func tlsLabels(data [2][]byte, kl KeyLog, app string) (labels [2][]Layer, decrypted bool) {
	keys, decrypted := tlsKeys(data, kl)
	for d := range 2 {
		b := data[d]
		t := &tlsDirection{labels: make([]Layer, len(b)), keys: keys[d], hs: &hsParser{}}
		fill(t.labels, 0, len(b), Undecrypted)
		for off := 0; off+5 <= len(b); {
			typ, n := b[off], int(b[off+3])<<8|int(b[off+4])
			end := min(off+5+n, len(b))
			fill(t.labels, off, off+5, TLS)
			switch typ {
			case 22: // cleartext handshake: ClientHello, ServerHello
				t.hs.feed(t.labels, b[off+5:end], off+5)
			case 23:
				t.protected(b, off, end)
			default: // ChangeCipherSpec (for middleboxes), alerts
				fill(t.labels, off+5, end, TLS)
			}
			off = end
		}
		for j, l := range appLabels(app, d, t.appBytes) {
			t.labels[t.appPos[j]] = l
		}
		labels[d] = t.labels
	}
	return labels, decrypted
}

// tlsKeys are each direction's handshake and application keys from the
// key log, and whether both directions' can be opened.
func tlsKeys(data [2][]byte, kl KeyLog) (keys [2][2]*aeadKeys, decrypted bool) {
	cs, ok := suites[serverCipher(data[1])]
	secrets := kl[hex.EncodeToString(clientRandom(data[0]))]
	if !ok || secrets == nil {
		return keys, false
	}
	names := [2][2]string{{"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"}, {"SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0"}}
	for d := range 2 {
		for e := range 2 {
			if s := secrets[names[d][e]]; s != nil {
				keys[d][e] = newKeys(cs, s, false)
			}
		}
	}
	return keys, keys[0][0] != nil && keys[1][1] != nil
}

// tlsDirection labels one direction's records as it walks them.
type tlsDirection struct {
	labels []Layer
	keys   [2]*aeadKeys // handshake, application
	epoch  int
	seq    uint64
	hs     *hsParser
	// The application data, decrypted, and where each octet was.
	appBytes []byte
	appPos   []int
}

// open decrypts a protected record: in the handshake epoch first, then
// the application one; each direction moves on after its Finished. nil
// when no key opens it.
func (t *tlsDirection) open(hdr, content []byte) []byte {
	if k := t.keys[t.epoch]; k != nil {
		if p, err := k.aead.Open(nil, k.nonce(t.seq), content, hdr); err == nil {
			t.seq++
			return p
		}
	}
	if k := t.keys[1]; t.epoch == 0 && k != nil {
		if p, err := k.aead.Open(nil, k.nonce(0), content, hdr); err == nil {
			t.epoch, t.seq = 1, 1
			return p
		}
	}
	return nil
}

// protected labels the record of b from off to end, of outer type
// application data, by its inner content type.
func (t *tlsDirection) protected(b []byte, off, end int) {
	plain := t.open(b[off:off+5], b[off+5:end])
	if plain == nil {
		return // stays undecrypted
	}
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 {
		fill(t.labels, off+5, end, TLS)
		return
	}
	fill(t.labels, off+5+i, end, TLS) // content type, padding, AEAD tag
	switch plain[i] {
	case 22:
		t.hs.feed(t.labels, plain[:i], off+5)
	case 23:
		t.appBytes = append(t.appBytes, plain[:i]...)
		for j := range i {
			t.appPos = append(t.appPos, off+5+j)
		}
	default:
		fill(t.labels, off+5, off+5+i, TLS)
	}
}

// hsParser labels handshake messages that may span records:
// certificates apart from the rest.
type hsParser struct {
	hdr  []byte
	left int
	typ  byte
}

func (h *hsParser) feed(labels []Layer, b []byte, base int) {
	for i := 0; i < len(b); {
		if h.left == 0 {
			h.hdr = append(h.hdr, b[i])
			labels[base+i] = TLSHandshake
			i++
			if len(h.hdr) == 4 {
				h.typ, h.left = h.hdr[0], int(h.hdr[1])<<16|int(h.hdr[2])<<8|int(h.hdr[3])
				h.hdr = h.hdr[:0]
			}
			continue
		}
		n := min(h.left, len(b)-i)
		l := TLSHandshake
		if h.typ == 11 || h.typ == 25 { // Certificate, CompressedCertificate
			l = Certificates
		}
		fill(labels, base+i, base+i+n, l)
		i += n
		h.left -= n
	}
}

// clientRandom finds the ClientHello's random in the first record.
func clientRandom(b []byte) []byte {
	if len(b) < 5+4+2+32 || b[0] != 22 || b[5] != 1 {
		return nil
	}
	return b[5+4+2 : 5+4+2+32]
}

// serverName reads the server_name extension (RFC 6066 §3) of a
// ClientHello handshake message; "" if it has none or is cut short.
func serverName(b []byte) string {
	u16 := func(b []byte) int { return int(binary.BigEndian.Uint16(b)) }
	// type and length, version, random
	if len(b) < 4+2+32+1 || b[0] != 1 {
		return ""
	}
	b = b[4+2+32:]
	for _, lenOctets := range []int{1, 2, 1} { // session ID, cipher suites, compression methods
		if len(b) < lenOctets {
			return ""
		}
		n := int(b[0])
		if lenOctets == 2 {
			n = u16(b)
		}
		if len(b) < lenOctets+n {
			return ""
		}
		b = b[lenOctets+n:]
	}
	if len(b) < 2 {
		return ""
	}
	b = b[2:min(len(b), 2+u16(b))]
	for len(b) >= 4 {
		typ, n := u16(b), u16(b[2:])
		if len(b) < 4+n {
			return ""
		}
		if d := b[4 : 4+n]; typ == 0 { // server_name: a list of (type, name)
			if len(d) < 5 || d[2] != 0 || len(d) < 5+u16(d[3:]) {
				return ""
			}
			return string(d[5 : 5+u16(d[3:])])
		}
		b = b[4+n:]
	}
	return ""
}

// serverCipher finds the ServerHello's cipher suite.
func serverCipher(b []byte) uint16 {
	const hdr = 5 + 4 + 2 + 32
	if len(b) < hdr+1 || b[0] != 22 || b[5] != 2 {
		return 0
	}
	sid := int(b[hdr])
	if len(b) < hdr+1+sid+2 {
		return 0
	}
	return uint16(b[hdr+1+sid])<<8 | uint16(b[hdr+2+sid])
}

// appLabels labels decrypted application data: DNS with its 2-octet
// length prefix (DoT), HTTP/1.1 (header block, body) or HTTP/2 frames.
func appLabels(app string, dir int, b []byte) []Layer {
	labels := make([]Layer, len(b))
	switch {
	case app == "dot" || app == "doq":
		fill(labels, 0, len(b), DNS)
	case bytes.HasPrefix(b, []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) || (dir == 1 && looksHTTP2(b)):
		http2Labels(b, labels)
	default:
		http1Labels(b, labels)
	}
	return labels
}

// looksHTTP2 tells a server's HTTP/2 stream (it starts with a SETTINGS
// frame) from HTTP/1.1 ("HTTP/1.1 200").
func looksHTTP2(b []byte) bool {
	return len(b) >= 9 && b[3] == 4 && !bytes.HasPrefix(b, []byte("HTTP/"))
}

func http2Labels(b []byte, labels []Layer) {
	i := 0
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	if bytes.HasPrefix(b, []byte(preface)) {
		fill(labels, 0, len(preface), HTTPMgmt)
		i = len(preface)
	}
	for i+9 <= len(b) {
		n := int(b[i])<<16 | int(b[i+1])<<8 | int(b[i+2])
		typ, flags := b[i+3], b[i+4]
		end := min(i+9+n, len(b))
		switch typ {
		case 0: // DATA: the DNS message, its frame header and padding HTTP
			fill(labels, i, end, HTTPHeaders)
			from, to := i+9, end
			if flags&0x08 != 0 && from < to {
				to -= int(b[from])
				from++
			}
			fill(labels, from, to, DNS)
		case 1, 9: // HEADERS, CONTINUATION
			fill(labels, i, end, HTTPHeaders)
		default: // SETTINGS, WINDOW_UPDATE, PING, PRIORITY, RST_STREAM, GOAWAY
			fill(labels, i, end, HTTPMgmt)
		}
		i = end
	}
	fill(labels, i, len(b), HTTPMgmt)
}

func http1Labels(b []byte, labels []Layer) {
	for i := 0; i < len(b); {
		end := bytes.Index(b[i:], []byte("\r\n\r\n"))
		if end < 0 {
			fill(labels, i, len(b), HTTPHeaders)
			return
		}
		head := string(b[i : i+end])
		fill(labels, i, i+end+4, HTTPHeaders)
		i += end + 4
		n := 0 // a length that is no count of octets (RFC 9110's 1*DIGIT) is no body: never a step back
		for _, line := range strings.Split(head, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "content-length") {
				u, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 31)
				n = int(u)
			}
		}
		fill(labels, i, i+n, DNS)
		i += n
	}
}

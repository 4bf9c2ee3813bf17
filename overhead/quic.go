package overhead

import (
	"encoding/binary"
	"encoding/hex"
	"time"
)

// udpConn keeps the datagrams of one UDP 4-tuple: Do53, or a QUIC
// connection (DoQ, DoH/3).
type udpConn struct {
	dgrams    []dgram
	shortSeen bool // the client sent a short-header packet: its handshake was done
	// cids are the connection IDs the connection's long headers carried:
	// a client's late Initial (lost and sent again, or reordered) carries
	// one of them (the client's own, as its source; as its destination
	// the one it first chose or the server's), a new connection's its
	// own.
	cids map[string]bool
}

type dgram struct {
	pkt        *Packet
	fromClient bool
	data       []byte
}

func (u *udpConn) add(pkt *Packet, payload []byte, fromClient bool) {
	u.dgrams = append(u.dgrams, dgram{pkt, fromClient, payload})
	if fromClient && len(payload) > 0 && payload[0]&0xc0 == 0x40 {
		u.shortSeen = true
	}
	if dcid, scid, _, ok := longCIDs(payload); ok {
		if u.cids == nil {
			u.cids = map[string]bool{}
		}
		for _, id := range [][]byte{dcid, scid} {
			if len(id) > 0 { // a zero-length ID tells nothing apart
				u.cids[string(id)] = true
			}
		}
	}
}

// newConnection says whether a client's datagram starts a new QUIC
// connection on this 4-tuple: an Initial after the handshake was done
// (the client's port reused) with connection IDs this connection never
// carried.
func (u *udpConn) newConnection(payload []byte) bool {
	if !u.shortSeen || !isInitial(payload) {
		return false
	}
	dcid, scid, _, ok := longCIDs(payload)
	return ok && !u.cids[string(dcid)] && (len(scid) == 0 || !u.cids[string(scid)])
}

// longCIDs reads a long header's destination and source connection IDs
// (RFC 9000 §17.2), and where the header goes on after them.
func longCIDs(b []byte) (dcid, scid []byte, end int, ok bool) {
	if len(b) < 6 || b[0]&0x80 == 0 {
		return nil, nil, 0, false
	}
	i := 5
	n := int(b[i])
	if i+1+n >= len(b) {
		return nil, nil, 0, false
	}
	dcid, i = b[i+1:i+1+n], i+1+n
	n = int(b[i])
	if i+1+n > len(b) {
		return nil, nil, 0, false
	}
	return dcid, b[i+1 : i+1+n], i + 1 + n, true
}

// occurrence is a CRYPTO or STREAM frame's data in one packet, labelled
// once its stream is whole.
type occurrence struct {
	pkt    *Packet
	stream streamKey
	offset int
	data   []byte
}

type streamKey struct {
	dir    int
	crypto bool
	level  int    // crypto: 0 Initial, 1 Handshake, 2 1-RTT
	id     uint64 // stream
}

// quicState is what decryption needs as it goes.
type quicState struct {
	kl      KeyLog
	keys    [2][3]*aeadKeys // dir, level (Initial, Handshake, 1-RTT)
	largest [2][3]int64
	random  []byte
	cipher  uint16
	cidLen  [2]int // the length of the DCID packets in each direction carry
	// Key updates (RFC 9001 §6): quic-go updates its 1-RTT keys after the
	// first 100 packets, and then regularly.
	suite     suite
	appSecret [2][]byte
	phase     [2]byte
	occ       []occurrence
	decrypted bool
	hello     [2]helloPrefix // the start of each side's Initial CRYPTO stream
	// early is when the client's first 0-RTT packet left (see
	// requestStreams).
	early time.Time
}

// helloPrefix gathers the first octets of a hello, which a client may
// send in small CRYPTO frames out of order (Chromium's "chaos
// protection" scatters its ClientHello so), until the random and the
// cipher suite are in.
type helloPrefix struct {
	b    [helloPrefixLen]byte
	have [helloPrefixLen]bool
	done bool
}

// helloPrefixLen covers a ServerHello's cipher suite after a session ID
// of up to 32 octets.
const helloPrefixLen = 4 + 2 + 32 + 1 + 32 + 2

// add copies data at off into the prefix and returns the whole prefix
// the first time every octet of it is there, nil otherwise.
func (h *helloPrefix) add(off int, data []byte) []byte {
	if h.done || off >= helloPrefixLen {
		return nil
	}
	for i, c := range data[:min(len(data), helloPrefixLen-off)] {
		h.b[off+i], h.have[off+i] = c, true
	}
	for _, ok := range h.have {
		if !ok {
			return nil
		}
	}
	h.done = true
	return h.b[:]
}

func (u *udpConn) attribute(c *Conn, kl KeyLog) {
	if c.App == "dns" {
		for _, d := range u.dgrams {
			d.pkt.Layers[DNS] += int64(len(d.data))
			d.pkt.FreshDNS += int64(len(d.data)) // a resent datagram is asked anew
		}
		return
	}
	st := &quicState{kl: kl, largest: [2][3]int64{{-1, -1, -1}, {-1, -1, -1}}}
	for _, d := range u.dgrams {
		st.datagram(d)
	}
	// Label the reassembled streams, then each occurrence's share.
	streams := map[streamKey][]byte{}
	kept := st.occ[:0]
	for _, o := range st.occ {
		if o.offset < 0 || o.offset+len(o.data) > len(streams[o.stream])+maxGap {
			o.pkt.Layers[Undecrypted] += int64(len(o.data)) // an offset no real stream reaches
			continue
		}
		kept = append(kept, o)
		b := streams[o.stream]
		if need := o.offset + len(o.data); need > len(b) {
			b = append(b, make([]byte, need-len(b))...)
		}
		copy(b[o.offset:], o.data)
		streams[o.stream] = b
	}
	st.occ = kept
	labels := map[streamKey][]Layer{}
	for k, b := range streams {
		l := make([]Layer, len(b))
		switch {
		case k.crypto:
			(&hsParser{}).feed(l, b, 0)
		case c.App == "doq":
			fill(l, 0, len(b), DNS)
		default:
			h3Labels(k.id, b, l)
		}
		labels[k] = l
	}
	seen := map[streamKey][]bool{}
	for k, b := range streams {
		seen[k] = make([]bool, len(b))
	}
	for _, o := range st.occ {
		end := o.offset + len(o.data)
		count(o.pkt, labels[o.stream][o.offset:end], seen[o.stream][o.offset:end])
	}
	c.Decrypted = st.decrypted
	c.SNI = serverName(streams[streamKey{dir: 0, crypto: true, level: 0}])
	c.Streams = requestStreams(st.occ, streams, st.early)
}

// requestStreams times the client's bidirectional streams: the first
// octet from the client, and the last packet with answer data (a
// retransmission that completes it included). Requests sent in 0-RTT
// are not seen: their keys come from the early secret, which Go's TLS
// does not log (a Go server's key log never has it). A stream answered
// without its request seen, on a connection that sent 0-RTT packets
// (the first at early), was asked in them, and is timed from the first.
func requestStreams(occ []occurrence, streams map[streamKey][]byte, early time.Time) []Stream {
	var out []Stream
	at := map[uint64]int{}
	for _, o := range occ {
		if o.stream.crypto || o.stream.id&0x03 != 0 {
			continue
		}
		i, ok := at[o.stream.id]
		if !ok {
			sent := o.pkt.Time
			if o.stream.dir != 0 {
				if early.IsZero() {
					continue // an answer before its request: not this capture's
				}
				sent = early
			}
			i = len(out)
			at[o.stream.id] = i
			out = append(out, Stream{ID: o.stream.id, Request: sent})
		}
		if o.stream.dir == 1 && o.pkt.Time.After(out[i].Last) {
			out[i].Last = o.pkt.Time
		}
	}
	for i := range out {
		out[i].Octets = len(streams[streamKey{dir: 1, id: out[i].ID}])
	}
	return out
}

// datagram walks the QUIC packets coalesced in one datagram.
func (st *quicState) datagram(d dgram) {
	dir := dirOf(d.fromClient)
	b := d.data
	for off := 0; off < len(b); {
		n := st.packet(d.pkt, dir, b[off:])
		if n <= 0 {
			d.pkt.Layers[QUIC] += int64(len(b) - off)
			return
		}
		off += n
	}
}

// packet handles one QUIC packet at the start of b and returns its length
// (0: the rest of the datagram is not parseable, count it as QUIC).
func (st *quicState) packet(pkt *Packet, dir int, b []byte) int {
	first := b[0]
	var pnOff, end, level int
	if first&0x80 != 0 { // long header
		if len(b) < 7 {
			return 0
		}
		version := binary.BigEndian.Uint32(b[1:])
		if version == 0 { // Version Negotiation
			return 0
		}
		dcid, scid, i, ok := longCIDs(b)
		if !ok {
			return 0
		}
		st.cidLen[1-dir] = len(scid) // the peer addresses us with our SCID
		typ := (first >> 4) & 3
		switch typ {
		case 0: // Initial
			tl, n := varint(b[i:])
			if n == 0 {
				return 0
			}
			i += n + int(tl)
			level = 0
			if dir == 0 && st.keys[0][0] == nil {
				st.keys[0][0], st.keys[1][0] = initialKeys(dcid)
			}
		case 2:
			level = 1
		default: // 0-RTT, Retry: not decrypted here
			if typ == 3 {
				return 0
			}
			level = -1
			if dir == 0 && st.early.IsZero() {
				st.early = pkt.Time
			}
		}
		length, n := varint(b[min(i, len(b)):])
		if n == 0 {
			return 0
		}
		pnOff = i + n
		end = min(pnOff+int(length), len(b))
		if level < 0 {
			pkt.Layers[Undecrypted] += int64(end)
			return end
		}
	} else {
		pnOff, end, level = 1+st.cidLen[dir], len(b), 2
	}
	k := st.keys[dir][level]
	if k == nil || k.hp == nil || pnOff+20 > end {
		pkt.Layers[Undecrypted] += int64(end)
		return end
	}
	hdr := append([]byte(nil), b[:pnOff+4]...)
	mask := make([]byte, 16)
	k.hp.Encrypt(mask, b[pnOff+4:pnOff+20])
	if first&0x80 != 0 {
		hdr[0] ^= mask[0] & 0x0f
	} else {
		hdr[0] ^= mask[0] & 0x1f
	}
	pnLen := int(hdr[0]&3) + 1
	var truncated uint64
	for j := 0; j < pnLen; j++ {
		hdr[pnOff+j] ^= mask[1+j]
		truncated = truncated<<8 | uint64(hdr[pnOff+j])
	}
	hdr = hdr[:pnOff+pnLen]
	pn := decodePN(st.largest[dir][level], truncated, pnLen)
	var next *aeadKeys
	var nextSecret []byte
	if level == 2 && (hdr[0]>>2)&1 != st.phase[dir] && st.appSecret[dir] != nil {
		nextSecret = hkdfExpandLabel(st.suite.hash, st.appSecret[dir], "quic ku", st.suite.hash().Size())
		next = newKeys(st.suite, nextSecret, true)
		next.hp = k.hp // header protection keys never change
		k = next
	}
	plain, err := k.aead.Open(nil, k.nonce(uint64(pn)), b[pnOff+pnLen:end], hdr)
	if err == nil && next != nil {
		st.keys[dir][2], st.appSecret[dir], st.phase[dir] = next, nextSecret, 1-st.phase[dir]
	}
	if err != nil {
		pkt.Layers[Undecrypted] += int64(end)
		return end
	}
	st.largest[dir][level] = max(st.largest[dir][level], pn)
	st.decrypted = true
	pkt.Layers[QUIC] += int64(end - len(plain)) // header, packet number, AEAD tag
	st.frames(pkt, dir, level, plain)
	return end
}

// decodePN is RFC 9000 Appendix A.3.
func decodePN(largest int64, truncated uint64, pnLen int) int64 {
	expected := largest + 1
	win := int64(1) << (pnLen * 8)
	half := win / 2
	candidate := (expected &^ (win - 1)) | int64(truncated)
	switch {
	case candidate <= expected-half && candidate < (1<<62)-win:
		return candidate + win
	case candidate > expected+half && candidate >= win:
		return candidate - win
	}
	return candidate
}

// frames labels one packet's frames: data of CRYPTO and STREAM frames
// through their streams, everything else QUIC.
func (st *quicState) frames(pkt *Packet, dir, level int, b []byte) {
	i := 0
	quic := func(n int) { pkt.Layers[QUIC] += int64(n) }
	vi := func() uint64 {
		v, n := varint(b[min(i, len(b)):])
		if n == 0 {
			i = len(b) + 1
		}
		i += n
		return v
	}
	for i < len(b) {
		start := i
		t := vi()
		switch {
		case t == 0x00 || t == 0x01 || t == 0x1e: // PADDING, PING, HANDSHAKE_DONE
		case t == 0x02 || t == 0x03: // ACK
			vi()
			vi()
			ranges := vi()
			vi()
			for r := uint64(0); r < ranges && i <= len(b); r++ {
				vi()
				vi()
			}
			if t == 0x03 {
				vi()
				vi()
				vi()
			}
		case t == 0x04:
			vi()
			vi()
			vi()
		case t == 0x05:
			vi()
			vi()
		case t == 0x06: // CRYPTO
			off, n := vi(), vi()
			quic(i - start)
			if i+int(n) > len(b) {
				quic(len(b) - i)
				return
			}
			st.crypto(pkt, dir, level, int(off), b[i:i+int(n)])
			i += int(n)
			continue
		case t == 0x07:
			n := vi()
			i += int(n)
		case t >= 0x08 && t <= 0x0f: // STREAM
			id := vi()
			var off uint64
			if t&0x04 != 0 {
				off = vi()
			}
			n := uint64(len(b) - i)
			if t&0x02 != 0 {
				n = vi()
			}
			quic(i - start)
			if i+int(n) > len(b) {
				quic(len(b) - i)
				return
			}
			st.occ = append(st.occ, occurrence{pkt, streamKey{dir: dir, id: id}, int(off), b[i : i+int(n)]})
			i += int(n)
			continue
		case t >= 0x10 && t <= 0x17 && t != 0x11 && t != 0x15:
			vi()
		case t == 0x11 || t == 0x15:
			vi()
			vi()
		case t == 0x18: // NEW_CONNECTION_ID
			vi()
			vi()
			if i < len(b) {
				i += 1 + int(b[i]) + 16
			}
		case t == 0x19:
			vi()
		case t == 0x1a || t == 0x1b:
			i += 8
		case t == 0x1c || t == 0x1d:
			vi()
			if t == 0x1c {
				vi()
			}
			i += int(vi())
		case t == 0x30 || t == 0x31:
			if t == 0x31 {
				i += int(vi())
			} else {
				i = len(b)
			}
		default: // unknown: the rest is QUIC
			i = len(b)
		}
		quic(min(i, len(b)) - start)
	}
}

// crypto records CRYPTO data; the ClientHello's random and the
// ServerHello's cipher suite, read from the start of the Initial streams,
// unlock the Handshake and 1-RTT keys.
func (st *quicState) crypto(pkt *Packet, dir, level, off int, data []byte) {
	st.occ = append(st.occ, occurrence{pkt, streamKey{dir: dir, crypto: true, level: level}, off, data})
	if level != 0 {
		return
	}
	if data = st.hello[dir].add(off, data); data == nil {
		return
	}
	if dir == 0 && data[0] == 1 {
		st.random = append([]byte(nil), data[6:38]...)
	}
	if dir == 1 && data[0] == 2 {
		sid := int(data[38])
		if len(data) >= 39+sid+2 {
			st.cipher = uint16(data[39+sid])<<8 | uint16(data[40+sid])
		}
	}
	cs, ok := suites[st.cipher]
	secrets := st.kl[hex.EncodeToString(st.random)]
	if !ok || secrets == nil {
		return
	}
	for d, names := range [2][2]string{{"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"}, {"SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0"}} {
		for e, name := range names {
			if s := secrets[name]; s != nil {
				st.keys[d][1+e] = newKeys(cs, s, true)
				if e == 1 {
					st.appSecret[d], st.suite = s, cs
				}
			}
		}
	}
}

// h3Labels labels one HTTP/3 stream: request streams (client-initiated
// bidirectional) carry HEADERS and DATA frames; unidirectional ones
// (control, QPACK) are management.
func h3Labels(id uint64, b []byte, l []Layer) {
	if id&0x02 != 0 {
		fill(l, 0, len(b), HTTPMgmt)
		return
	}
	for i := 0; i < len(b); {
		t, n1 := varint(b[i:])
		ln, n2 := varint(b[min(i+n1, len(b)):])
		if n1 == 0 || n2 == 0 {
			fill(l, i, len(b), HTTPHeaders)
			return
		}
		hdrEnd := i + n1 + n2
		end := min(hdrEnd+int(ln), len(b))
		switch t {
		case 0x00: // DATA
			fill(l, i, hdrEnd, HTTPHeaders)
			fill(l, hdrEnd, end, DNS)
		case 0x01:
			fill(l, i, end, HTTPHeaders)
		default:
			fill(l, i, end, HTTPMgmt)
		}
		i = end
	}
}

// varint reads a QUIC variable-length integer; n is 0 if b is too short.
func varint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v = uint64(b[0] & 0x3f)
	for j := 1; j < n; j++ {
		v = v<<8 | uint64(b[j])
	}
	return v, n
}

// Package overhead attributes every captured byte of DNS traffic to a
// protocol layer, as the DoH-cost paper's Fig. 5 and the IMC 2022 slides'
// single-query sizes do: IP and TCP/UDP headers, TLS (record framing,
// handshake, certificates apart), QUIC (headers, frames, tags), HTTP
// headers and HTTP management frames, and the DNS messages. It decrypts
// TLS 1.3 records and QUIC packets itself with the secrets the client
// logged (Wireshark 4.0 has no DoQ dissector), so the layers of a packet
// always add up to its length: what cannot be decrypted is counted as
// such, never dropped.
package overhead

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/doxlab/doxlab/protocol"
)

// Layer is one protocol layer.
type Layer int

// The layers, outermost first.
const (
	IP Layer = iota
	TransportHdr
	TLS
	TLSHandshake
	Certificates
	QUIC
	HTTPHeaders
	HTTPMgmt
	DNS
	Undecrypted
	NumLayers
)

// LayerNames name the layers in output.
var LayerNames = [NumLayers]string{"ip", "tcp/udp", "tls", "tls-handshake", "certificates", "quic", "http-headers", "http-mgmt", "dns", "undecrypted"}

func (l Layer) String() string { return LayerNames[l] }

// Counts are octets per layer.
type Counts [NumLayers]int64

// Total is the sum over the layers.
func (c Counts) Total() (n int64) {
	for _, v := range c {
		n += v
	}
	return n
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	for i, v := range o {
		c[i] += v
	}
}

// Raw is one captured IPv4 packet.
type Raw struct {
	Time time.Time
	Data []byte
}

// Packet is one packet with its octets per layer.
type Packet struct {
	Time       time.Time
	FromClient bool
	Len        int
	Layers     Counts
	// FreshDNS are the DNS octets no earlier packet of the capture
	// carried: a retransmission (a loss repaired, or a tail-loss probe
	// sent early on a busy host) carries its DNS octets again, counted
	// in Layers as the wire's cost, but asks nothing new.
	FreshDNS int64
}

// HasDNS reports whether the packet carries DNS message octets.
func (p *Packet) HasDNS() bool { return p.Layers[DNS] > 0 }

// Conn is one connection (a TCP connection, or a UDP 4-tuple) with its
// packets in capture order.
type Conn struct {
	Proto          string // tcp or udp
	Client, Server netip.AddrPort
	App            string // dns, dot, doh (HTTP/1.1 or /2), doq, doh3
	Packets        []*Packet
	Decrypted      bool   // the keys were found and used
	SNI            string // the name the ClientHello asked for, where seen
	// Streams are a decrypted QUIC connection's request streams (client-
	// initiated, bidirectional), in the order their requests left.
	Streams []Stream
}

// Stream is one request stream of a QUIC connection, as the capture saw
// it: when its first octet left the client and when the last octet of
// the answer arrived, the times a page load's replay is held to.
type Stream struct {
	ID            uint64
	Request, Last time.Time // Last is zero if no answer came
	Octets        int       // the answer's stream octets (HTTP/3 frames)
}

// Totals sums a connection's packets per direction.
func (c *Conn) Totals() (up, down Counts, upPkts, downPkts int) {
	for _, p := range c.Packets {
		if p.FromClient {
			up.Add(p.Layers)
			upPkts++
		} else {
			down.Add(p.Layers)
			downPkts++
		}
	}
	return
}

// AppFor says which application protocol a server port carries.
type AppFor func(proto string, port uint16) string

// DefaultApps maps the standard ports: 53 Do53, 853 DoT and DoQ, 443 DoH
// (HTTP/1.1 or /2 over TCP, HTTP/3 over UDP).
// They come from the protocol table: the first row whose port and
// datagram-ness match names its listener (DoH over TCP is "doh").
func DefaultApps(proto string, port uint16) string {
	for _, p := range protocol.All {
		if p.Port == int(port) && p.Datagram == (proto == "udp") && p.Port != 53 {
			return p.Listener()
		}
	}
	return "dns"
}

// Attribute splits captured packets into connections with a server
// address and attributes their octets to layers.
func Attribute(raws []Raw, server netip.Addr, apps AppFor, kl KeyLog) ([]*Conn, error) {
	sort.SliceStable(raws, func(i, j int) bool { return raws[i].Time.Before(raws[j].Time) })
	type key struct {
		proto  string
		client netip.AddrPort
		port   uint16
	}
	conns := map[key]*Conn{}
	var order []*Conn
	var tcps = map[*Conn]*tcpConn{}
	var udps = map[*Conn]*udpConn{}
	for _, r := range raws {
		p, err := parseIP(r.Data)
		if err != nil {
			return nil, err
		}
		if p.src.Addr() != server && p.dst.Addr() != server {
			continue
		}
		fromClient := p.dst.Addr() == server
		client, srv := p.src, p.dst
		if !fromClient {
			client, srv = p.dst, p.src
		}
		k := key{p.proto, client, srv.Port()}
		c := conns[k]
		// A new SYN on a used 4-tuple is a new connection, and so is a
		// QUIC Initial from the client, after short-header packets, with
		// connection IDs the connection never carried: the client's port
		// was reused.
		if c == nil || (p.proto == "tcp" && p.syn && fromClient && len(c.Packets) > 2) ||
			(p.proto == "udp" && fromClient && udps[c].newConnection(p.payload)) {
			c = &Conn{Proto: p.proto, Client: client, Server: srv, App: apps(p.proto, srv.Port())}
			if p.proto != "tcp" && p.proto != "udp" {
				c.App = p.proto
			}
			conns[k] = c
			order = append(order, c)
			if p.proto == "tcp" {
				tcps[c] = &tcpConn{}
			} else {
				udps[c] = &udpConn{}
			}
		}
		pkt := &Packet{Time: r.Time, FromClient: fromClient, Len: len(r.Data)}
		pkt.Layers[IP] = int64(p.ipHdr)
		pkt.Layers[TransportHdr] = int64(p.l4Hdr)
		c.Packets = append(c.Packets, pkt)
		if p.proto == "tcp" {
			tcps[c].add(pkt, p, fromClient)
		} else {
			udps[c].add(pkt, p.payload, fromClient)
		}
	}
	for _, c := range order {
		if t, ok := tcps[c]; ok {
			t.attribute(c, kl)
		} else if u, ok := udps[c]; ok && c.Proto == "udp" {
			u.attribute(c, kl)
		}
		for _, p := range c.Packets {
			if p.Layers.Total() != int64(p.Len) {
				return nil, fmt.Errorf("attribution of a %d-octet packet adds up to %d (%v)", p.Len, p.Layers.Total(), p.Layers)
			}
		}
	}
	return order, nil
}

type ipPacket struct {
	proto        string
	src, dst     netip.AddrPort
	ipHdr, l4Hdr int
	payload      []byte
	seq          uint32
	syn, fin     bool
}

func parseIP(b []byte) (*ipPacket, error) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return nil, fmt.Errorf("not an IPv4 packet")
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(b[2])<<8 | int(b[3])
	if total > len(b) || ihl < 20 || ihl > total {
		return nil, fmt.Errorf("truncated IPv4 packet")
	}
	b = b[:total]
	src, _ := netip.AddrFromSlice(b[12:16])
	dst, _ := netip.AddrFromSlice(b[16:20])
	l4 := b[ihl:]
	p := &ipPacket{ipHdr: ihl}
	switch b[9] {
	case 6:
		if len(l4) < 20 {
			return nil, fmt.Errorf("truncated TCP header")
		}
		off := int(l4[12]>>4) * 4
		if off < 20 || off > len(l4) {
			return nil, fmt.Errorf("bad TCP header length %d", off)
		}
		p.proto, p.l4Hdr, p.payload = "tcp", off, l4[off:]
		p.seq = uint32(l4[4])<<24 | uint32(l4[5])<<16 | uint32(l4[6])<<8 | uint32(l4[7])
		p.syn, p.fin = l4[13]&0x02 != 0, l4[13]&0x01 != 0
	case 17:
		if len(l4) < 8 {
			return nil, fmt.Errorf("truncated UDP header")
		}
		p.proto, p.l4Hdr, p.payload = "udp", 8, l4[8:]
	case 1:
		p.proto, p.l4Hdr = "icmp", len(l4) // e.g. port unreachable after a close
	default:
		p.proto, p.l4Hdr = "other", len(l4)
	}
	if len(l4) >= 4 {
		p.src = netip.AddrPortFrom(src, uint16(l4[0])<<8|uint16(l4[1]))
		p.dst = netip.AddrPortFrom(dst, uint16(l4[2])<<8|uint16(l4[3]))
	}
	return p, nil
}

// isInitial reports whether a UDP payload starts with a QUIC v1 Initial.
func isInitial(b []byte) bool {
	return len(b) >= 5 && b[0]&0xb0 == 0x80 && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[4] == 1 && (b[0]>>4)&3 == 0
}

// count counts a packet's run of stream octets by their labels, and
// among its DNS octets those seen for the first time, marking the run
// seen (seen and labels are the same run of the stream).
func count(p *Packet, labels []Layer, seen []bool) {
	for i, l := range labels {
		p.Layers[l]++
		if !seen[i] {
			seen[i] = true
			if l == DNS {
				p.FreshDNS++
			}
		}
	}
}

// fill labels b[from:to] with l, within bounds.
func fill(b []Layer, from, to int, l Layer) {
	for i := max(from, 0); i < min(to, len(b)); i++ {
		b[i] = l
	}
}

package server

import (
	"context"
	"net"
	"runtime"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

// udpBatch is how many datagrams one system call reads or writes
// (recvmmsg, sendmmsg); udpSlot is the largest query a batched read
// takes whole (a longer one is refused as malformed, as no resolver
// sends queries that size over UDP).
const (
	udpBatch = 32
	udpSlot  = 8192
)

// serveUDP answers Do53 over UDP. It opens one socket per CPU the
// runtime uses, all bound to addr with SO_REUSEPORT, so that the kernel
// spreads clients over them; each socket's reader takes datagrams in
// batches. Without delays or forwarding an answer is quick, so the reader
// answers inline and sends the batch's answers in one call; otherwise a
// goroutine per query answers it, so that one slow query never holds up
// others. Answers larger than the client's UDP size are truncated with
// TC set (RFC 1035 §4.2.1, RFC 6891 §6.2.3).
func (s *Server) serveUDP(addr string) error {
	n := max(1, runtime.GOMAXPROCS(0))
	if !canReusePort {
		n = 1
	}
	lc := net.ListenConfig{}
	if n > 1 {
		// SO_REUSEPORT would also let a second server bind the same port
		// and silently take half the queries: a plain bind first fails
		// as it should if the port is taken.
		probe, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		probe.Close()
		lc.Control = reusePort
	}
	first, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return err
	}
	conns := []*net.UDPConn{first.(*net.UDPConn)}
	s.track("udp", first.LocalAddr(), first)
	for range n - 1 {
		// The same port as the first, which may have been chosen by the
		// kernel (port 0). A platform without SO_REUSEPORT keeps one.
		pc, err := lc.ListenPacket(context.Background(), "udp", first.LocalAddr().String())
		if err != nil {
			break
		}
		s.track("", nil, pc)
		conns = append(conns, pc.(*net.UDPConn))
	}
	inline := s.quick()
	for _, c := range conns {
		c.SetReadBuffer(4 << 20) // a burst must not overflow it while the reader answers
		c.SetWriteBuffer(4 << 20)
		s.goServe(func() { s.readUDP(c, inline) })
	}
	return nil
}

// readUDP reads c's datagrams in batches until the server closes.
func (s *Server) readUDP(c *net.UDPConn, inline bool) {
	pc := ipv4.NewPacketConn(c) // its batch calls serve IPv6 sockets too
	in := make([]ipv4.Message, udpBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, udpSlot)}
	}
	out := make([]ipv4.Message, 0, udpBatch)
	bufs := make([][]byte, udpBatch) // the answers' packing buffers, reused
	for i := range bufs {
		bufs[i] = make([]byte, 0, 4096)
	}
	local := c.LocalAddr().String()
	for {
		n, err := pc.ReadBatch(in, 0)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			continue
		}
		received := time.Now()
		out = out[:0]
		for _, m := range in[:n] {
			raddr := m.Addr
			if raddr == nil {
				continue
			}
			if m.Flags&msgTrunc != 0 {
				s.refuse("udp", "udp", raddr, ReasonMalformed, "query larger than 8192 octets over UDP")
				continue
			}
			q := new(dns.Msg)
			if err := q.Unpack(m.Buffers[0][:m.N]); err != nil {
				// Not DNS: no answer, as for any UDP garbage.
				s.refuse("udp", "udp", raddr, ReasonMalformed, err.Error())
				continue
			}
			if q.Response {
				// Never answer an answer: one spoofed datagram from our
				// own address would have us answer ourselves for ever.
				s.refuse("udp", "udp", raddr, ReasonResponse, "QR=1")
				continue
			}
			if !inline {
				go func() {
					if b, ok := s.answerUDP(q, raddr, local, received, nil); ok {
						c.WriteTo(b, raddr)
					}
				}()
				continue
			}
			i := len(out)
			if b, ok := s.answerUDP(q, raddr, local, received, bufs[i][:0]); ok {
				bufs[i] = b
				out = append(out, ipv4.Message{Buffers: [][]byte{b}, Addr: raddr})
			}
		}
		for len(out) > 0 {
			k, err := pc.WriteBatch(out, 0)
			if err != nil {
				break // the client's problem (unreachable, gone): the answers are dropped, as a lone sendto's would be
			}
			out = out[k:]
		}
	}
}

// answerUDP answers q from raddr, packed into buf (nil: a new buffer);
// false means no answer (dropped, or it would not pack).
func (s *Server) answerUDP(q *dns.Msg, raddr net.Addr, local string, received time.Time, buf []byte) ([]byte, bool) {
	rec := &Record{Transport: "udp", Listener: "udp"}
	if s.recording() { // formatting addresses is a fair share of a query's cost
		rec.Remote, rec.Local = raddr.String(), local
	}
	r := s.handle(s.ctx, q, rec, received)
	if r == nil {
		return nil, false
	}
	truncate(r, udpSize(q))
	out, err := r.PackBuffer(buf)
	return out, err == nil
}

// maxUDPSize is the largest answer sent over UDP, whatever the query's
// EDNS(0) buffer size says: the size this server advertises, the DNS
// Flag Day 2020's, which no path fragments. A larger one would be
// fragmented on the way (and spoofable in its fragments), and is
// what a reflection attack asks for with a 64 KB buffer size.
const maxUDPSize = 1232

// udpSize is how large q's answer over UDP may be: 512 octets, or the
// EDNS(0) buffer size q says, at most maxUDPSize (RFC 6891 §6.2.5).
func udpSize(q *dns.Msg) int {
	if o := q.IsEdns0(); o != nil {
		return min(max(int(o.UDPSize()), dns.MinMsgSize), maxUDPSize)
	}
	return dns.MinMsgSize
}

// truncate fits r into size octets as miekg's Truncate does, but sets TC
// only when a record of the answer or authority section had to go: the
// additional section is optional, and a client told to retry over TCP
// for it is sent there for nothing (RFC 2181 §9).
func truncate(r *dns.Msg, size int) {
	tc, an, ns := r.Truncated, len(r.Answer), len(r.Ns)
	r.Truncate(size)
	if !tc && len(r.Answer) == an && len(r.Ns) == ns {
		r.Truncated = false
	}
}

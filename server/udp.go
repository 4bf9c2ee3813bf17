package server

import (
	"net"
	"runtime"
	"time"

	"github.com/miekg/dns"
)

// serveUDP answers Do53 over UDP. Several readers share the socket so one
// slow query never holds up others; answers larger than the client's UDP
// size are truncated with TC set (RFC 1035 §4.2.1, RFC 6891 §6.2.3).
func (s *Server) serveUDP(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	s.track("udp", pc.LocalAddr(), pc)
	// Without delays or forwarding an answer is quick: answer inline, and
	// spare the goroutine per query.
	f := s.cfg.Faults
	inline := f.Delay == 0 && f.DelayEvery == 0 && f.DelayProbability == 0 && len(f.DelayNames) == 0 && s.ans.fwd == nil
	for range max(2, runtime.GOMAXPROCS(0)) {
		s.goServe(func() {
			buf := make([]byte, 65535)
			for {
				n, raddr, err := pc.ReadFrom(buf)
				if err != nil {
					if s.ctx.Err() != nil {
						return
					}
					continue
				}
				received := time.Now()
				q := new(dns.Msg)
				if err := q.Unpack(buf[:n]); err != nil {
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
				if inline {
					s.answerUDP(pc, raddr, q, received)
				} else {
					go s.answerUDP(pc, raddr, q, received)
				}
			}
		})
	}
	return nil
}

func (s *Server) answerUDP(pc net.PacketConn, raddr net.Addr, q *dns.Msg, received time.Time) {
	rec := &Record{Transport: "udp", Listener: "udp", Remote: raddr.String(), Local: pc.LocalAddr().String()}
	r := s.handle(s.ctx, q, rec, received)
	if r == nil {
		return
	}
	size := dns.MinMsgSize
	if o := q.IsEdns0(); o != nil && int(o.UDPSize()) > size {
		size = int(o.UDPSize())
	}
	r.Truncate(size)
	if out, err := r.Pack(); err == nil {
		pc.WriteTo(out, raddr)
	}
}

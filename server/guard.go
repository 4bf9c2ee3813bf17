package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Reason says why the server refused, dropped or closed something. The
// set is closed: metrics and records carry one of these.
type Reason string

const (
	// ReasonResponse: a message with QR=1 arrived where a query belongs.
	// Answering it would let one spoofed datagram (source: the server
	// itself, or another server) start an endless answer loop.
	ReasonResponse Reason = "response"
	// ReasonMalformed: the message did not parse (UDP: dropped; TCP and
	// DoT: FORMERR when the header is readable).
	ReasonMalformed Reason = "malformed"
	// ReasonFraming: a stream's length prefix or message was broken, or
	// a DoQ stream carried more than one message; the connection is closed.
	ReasonFraming Reason = "framing"
	// ReasonTooLarge: the query exceeds limits.max_msg.
	ReasonTooLarge Reason = "too-large"
	// ReasonConnLimit: the listener holds limits.max_conns connections
	// and none of them was idle to make room.
	ReasonConnLimit Reason = "conn-limit"
	// ReasonSourceLimit: the client's address (IPv6: its /64) already
	// holds limits.max_conns_per_source connections.
	ReasonSourceLimit Reason = "source-limit"
	// ReasonEvicted: an idle connection was closed to make room for a new
	// one at the connection limit (RFC 7766 §6.2.3).
	ReasonEvicted Reason = "evicted"
	// ReasonSlow: a connection did not finish its handshake and first
	// query, or a query it had begun, within limits.handshake_timeout.
	ReasonSlow Reason = "slow"
	// ReasonHandshake: the TLS handshake failed.
	ReasonHandshake Reason = "handshake-error"
	// ReasonProtocol: an RFC 9250 violation closed a DoQ connection with
	// DOQ_PROTOCOL_ERROR (message ID, keepalive option, unidirectional
	// stream, trailing bytes).
	ReasonProtocol Reason = "protocol-error"
	// ReasonBuffer: a DoQ connection held more unfinished query bytes
	// than limits.max_conn_buffer; closed with DOQ_EXCESSIVE_LOAD.
	ReasonBuffer Reason = "buffer-limit"
	// ReasonBadRequest: a DoH request was refused with a 4xx status.
	ReasonBadRequest Reason = "bad-request"
	// ReasonForwardLimit: answers.forward_max_in_flight queries were
	// already forwarded and unanswered; answered SERVFAIL at once.
	ReasonForwardLimit Reason = "forward-limit"
	// ReasonForwardBudget: answers.forward_budget queries were already
	// forwarded in the server's life; answered REFUSED at once.
	ReasonForwardBudget Reason = "forward-budget"
	// ReasonBlocked: a forwarded answer held an address that
	// answers.ForwardRefuse refuses (a campaign's blocklist), and was
	// answered REFUSED instead.
	ReasonBlocked Reason = "blocked"
)

// refusalRecords bounds the refusal records written per second, so an
// attack cannot fill a disk; the metrics count every refusal.
const refusalRecords = 50

// refusals counts and records what the server refused.
type refusals struct {
	limit      *rate.Limiter
	mu         sync.Mutex
	suppressed int
}

func newRefusals() *refusals {
	return &refusals{limit: rate.NewLimiter(refusalRecords, 2*refusalRecords)}
}

// refuse counts a refusal in the metrics and writes a record of it,
// unless records are coming faster than refusalRecords a second; the next
// record written says how many were left out.
func (s *Server) refuse(listener, transport string, remote net.Addr, reason Reason, detail string) {
	if s.metrics != nil {
		s.metrics.refusals.WithLabelValues(listener, string(reason)).Inc()
	}
	rf := s.refusals
	rf.mu.Lock()
	if !rf.limit.Allow() {
		rf.suppressed++
		rf.mu.Unlock()
		return
	}
	n := rf.suppressed
	rf.suppressed = 0
	rf.mu.Unlock()
	rec := &Record{Kind: "refusal", Transport: transport, Listener: listener, Reason: string(reason), Error: detail, Suppressed: n}
	if remote != nil {
		rec.Remote = remote.String()
	}
	if a := s.Addr(listener); a != nil {
		rec.Local = a.String()
	}
	s.rec.write(rec)
}

// sourceOf is the key per-source limits count by: the IPv4 address, or
// the /64 of an IPv6 address (one subscriber's usual allocation); and the
// address itself, for grouping sources by wider prefixes.
func sourceOf(a net.Addr) (string, netip.Addr) {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return a.String(), netip.Addr{}
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String(), ip
	}
	return ip.String(), ip
}

// groupBits are the prefix lengths the pool groups sources by when it
// must make room, finest first: an address (an IPv6 /64), then the
// networks around it. Many addresses of one network holding the
// listener's connections count as one source that holds many.
var groupBits = [...]struct{ v4, v6 int }{{32, 64}, {24, 48}, {16, 32}}

// pool admits a listener's connections: at most max in all and perSource
// from one source. At the limit it makes room by closing one: a stalled
// connection first (an answer left untaken for stall: a client that
// withholds its acknowledgements or its window holds the connection busy
// for nothing), then one of the source holding the most: an idle one (no
// query in flight) idle longest, as RFC 7766 §6.2.3 suggests and Unbound
// does, so a client that holds connections it does not use cannot lock
// others out; else a busy one, if that source holds more than the
// newcomer's will, so a few addresses keeping every connection busy
// cannot lock out the rest. A source holding fewer than the newcomer's
// will never gives up a connection that is answering (a flood cannot
// close a client's connection still in its handshake), but a source may
// always replace its own idle connection. When no single address holds
// more, sources are counted again by wider prefixes (groupBits): many
// addresses of one network are one source then. Otherwise the new one is
// refused.
type pool struct {
	max, perSource int
	stall          time.Duration

	mu       sync.Mutex
	slots    map[*slot]struct{}
	bySource map[string]int
}

func newPool(max, perSource int, stall time.Duration) *pool {
	return &pool{max: max, perSource: perSource, stall: stall, slots: map[*slot]struct{}{}, bySource: map[string]int{}}
}

// slot is one admitted connection.
type slot struct {
	p      *pool
	source string
	addr   netip.Addr // the client's address, for grouping by prefix
	remote net.Addr
	evict  func() // closes the connection
	busy   int    // queries in flight
	idle   time.Time
	// arrived is when the last query or request arrived whole: a stream
	// that ends slow with nothing arrived since it began was stalled.
	arrived time.Time
	// writing counts the writes of answers under way; moved is when one
	// last began or ended: writing for stall since moved is stalled.
	writing int
	moved   time.Time
	gone    bool
}

// group is the key of sl's source at grouping level l.
func (sl *slot) group(l int) string {
	if l == 0 || !sl.addr.IsValid() {
		return sl.source
	}
	bits := groupBits[l].v4
	if sl.addr.Is6() {
		bits = groupBits[l].v6
	}
	p, _ := sl.addr.Prefix(bits)
	return p.String()
}

// stalled says whether an answer has waited for the client since stall
// ago with nothing taken.
func (sl *slot) stalled(now time.Time) bool {
	return sl.writing > 0 && now.Sub(sl.moved) >= sl.p.stall
}

// admit takes a slot for a connection from remote, or says why not. The
// evicted connection, if any, is closed by the caller's evict function
// outside the pool's lock, and why it was chosen is said.
func (p *pool) admit(remote net.Addr, evict func()) (*slot, Reason, *slot, string) {
	src, addr := sourceOf(remote)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySource[src] >= p.perSource {
		return nil, ReasonSourceLimit, nil, ""
	}
	sl := &slot{p: p, source: src, addr: addr, remote: remote, evict: evict, idle: time.Now()}
	var victim *slot
	var why string
	if len(p.slots) >= p.max {
		if victim, why = p.victim(sl); victim == nil {
			return nil, ReasonConnLimit, nil, ""
		}
		p.releaseLocked(victim)
	}
	p.slots[sl] = struct{}{}
	p.bySource[src]++
	return sl, "", victim, why
}

// victim is the connection to close to make room for newcomer, or nil,
// and why it was chosen (see pool).
func (p *pool) victim(newcomer *slot) (*slot, string) {
	now := time.Now()
	for l := range groupBits {
		counts := p.bySource
		if l > 0 {
			counts = map[string]int{}
			for sl := range p.slots {
				counts[sl.group(l)]++
			}
		}
		want := counts[newcomer.group(l)] + 1
		var best *slot
		for sl := range p.slots {
			// A source may replace its own idle connection; a wider
			// group is not its own.
			n, own := counts[sl.group(l)], sl.source == newcomer.source
			switch {
			case sl.stalled(now):
			case sl.busy == 0 && (n >= want || own):
			case sl.busy > 0 && n > want && !own:
			default:
				continue
			}
			if best == nil || betterVictim(sl, best, counts, l, now) {
				best = sl
			}
		}
		if best != nil {
			return best, victimWhy(best, counts[best.group(l)], l, now)
		}
	}
	return nil, ""
}

// betterVictim orders candidates: stalled first, then the source (or
// network) holding more, then idle before busy, then idle (or active)
// longer ago.
func betterVictim(a, b *slot, counts map[string]int, l int, now time.Time) bool {
	sa, sb := a.stalled(now), b.stalled(now)
	na, nb := counts[a.group(l)], counts[b.group(l)]
	switch {
	case sa != sb:
		return sa
	case na != nb:
		return na > nb
	case (a.busy == 0) != (b.busy == 0):
		return a.busy == 0
	}
	return a.idle.Before(b.idle)
}

// victimWhy says why a connection was closed to make room.
func victimWhy(sl *slot, n, l int, now time.Time) string {
	from := "its source"
	if l > 0 {
		from = "its network " + sl.group(l)
	}
	switch {
	case sl.stalled(now):
		return fmt.Sprintf("stalled at the connection limit: an answer untaken for %v", now.Sub(sl.moved).Round(time.Millisecond))
	case sl.busy == 0:
		return fmt.Sprintf("idle longest at the connection limit (%s holds %d)", from, n)
	}
	return fmt.Sprintf("busy at the connection limit, %s holding the most (%d)", from, n)
}

// release frees the slot; a second call, or one after eviction, does
// nothing, so a refused or evicted connection never frees a slot twice.
func (sl *slot) release() {
	sl.p.mu.Lock()
	sl.p.releaseLocked(sl)
	sl.p.mu.Unlock()
}

func (p *pool) releaseLocked(sl *slot) {
	if sl.gone {
		return
	}
	sl.gone = true
	delete(p.slots, sl)
	if p.bySource[sl.source]--; p.bySource[sl.source] <= 0 {
		delete(p.bySource, sl.source)
	}
}

// begin and end bracket a query; a connection with none in flight is idle
// and may be closed to make room.
func (sl *slot) begin() {
	sl.p.mu.Lock()
	sl.busy++
	sl.arrived = time.Now()
	sl.p.mu.Unlock()
}

// arrivedSince reports whether a query or request arrived whole after t.
func (sl *slot) arrivedSince(t time.Time) bool {
	sl.p.mu.Lock()
	defer sl.p.mu.Unlock()
	return sl.arrived.After(t)
}

func (sl *slot) end() {
	sl.p.mu.Lock()
	sl.busy--
	sl.idle = time.Now()
	sl.p.mu.Unlock()
}

// writeBegin and writeEnd bracket a write of an answer to the client: one
// that does not return for the pool's stall time leaves the connection
// stalled. A nil slot (a connection the pool does not hold) is ignored.
func (sl *slot) writeBegin() {
	if sl == nil {
		return
	}
	sl.p.mu.Lock()
	sl.writing++
	sl.moved = time.Now()
	sl.p.mu.Unlock()
}

func (sl *slot) writeEnd() {
	if sl == nil {
		return
	}
	sl.p.mu.Lock()
	sl.writing--
	sl.moved = time.Now()
	sl.p.mu.Unlock()
}

// admit takes a slot in p for a connection from remote, closing an idle
// one to make room if it must; nil means refused. Both are counted.
func (s *Server) admit(p *pool, listener, transport string, remote net.Addr, closeConn func()) *slot {
	sl, why, victim, chosen := p.admit(remote, closeConn)
	if victim != nil {
		victim.evict()
		s.refuse(listener, transport, victim.remote, ReasonEvicted, chosen)
	}
	if sl == nil {
		s.refuse(listener, transport, remote, why, "")
	}
	return sl
}

// stallConn tells its connection's slot when an answer is being written:
// a write the client does not take (its receive window closed, its
// acknowledgements withheld) leaves the connection stalled after the
// pool's stall time. The slot is set once the connection is admitted.
type stallConn struct {
	net.Conn
	sl atomic.Pointer[slot]
}

// notSentLowat bounds what the kernel keeps unsent for one of our TCP
// connections (TCP_NOTSENT_LOWAT): past it a write waits. Without it a
// client that reads nothing parks up to tcp_wmem's maximum (4 MB) in the
// kernel before any write blocks, so it is neither seen as stalled nor
// bounded in memory. 128 kB holds two of the largest DNS messages.
const notSentLowat = 128 << 10

// newStallConn wraps an accepted TCP connection, its unsent octets
// bounded (notSentLowat).
func newStallConn(c net.Conn) *stallConn {
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { setNotSentLowat(fd, notSentLowat) })
		}
	}
	return &stallConn{Conn: c}
}

func (c *stallConn) Write(p []byte) (int, error) {
	sl := c.sl.Load()
	sl.writeBegin()
	defer sl.writeEnd()
	return c.Conn.Write(p)
}

// NetConn is the connection under c.
func (c *stallConn) NetConn() net.Conn { return c.Conn }

// stallOf finds the stallConn under c, through TLS and other wrappers
// that say what they wrap, or nil.
func stallOf(c net.Conn) *stallConn {
	for c != nil {
		if sc, ok := c.(*stallConn); ok {
			return sc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// stallWriter brackets an HTTP response's writes for its connection's
// slot, as stallConn does for a stream connection's.
type stallWriter struct {
	http.ResponseWriter
	sl *slot
}

func (w stallWriter) Write(p []byte) (int, error) {
	w.sl.writeBegin()
	defer w.sl.writeEnd()
	return w.ResponseWriter.Write(p)
}

func (w stallWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.sl.writeBegin()
		defer w.sl.writeEnd()
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// stallKey holds a request's stallConn in its context.
type stallKey struct{}

// stallHandler brackets the writes of h's responses for their
// connection's slot: an HTTP/2 response blocked on a client's flow
// control never blocks a socket write, so stallConn alone would not see it.
func stallHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc, ok := r.Context().Value(stallKey{}).(*stallConn); ok {
			if sl := sc.sl.Load(); sl != nil {
				w = stallWriter{ResponseWriter: w, sl: sl}
			}
		}
		h.ServeHTTP(w, r)
	})
}

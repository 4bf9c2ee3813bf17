package server

import (
	"net"
	"net/netip"
	"sync"
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
// the /64 of an IPv6 address (one subscriber's usual allocation).
func sourceOf(a net.Addr) string {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return a.String()
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// pool admits a listener's connections: at most max in all and perSource
// from one source. At the limit it makes room by closing a connection of
// the source that holds the most: an idle one (no query in flight) idle
// longest, as RFC 7766 §6.2.3 suggests and Unbound does, so a client that
// holds connections it does not use cannot lock others out; else a busy
// one, if that source holds more than the newcomer's will, so a few
// addresses keeping every connection busy cannot lock out the rest. A
// source holding fewer than the newcomer's will never gives one up (a
// flood cannot close a client's connection still in its handshake), but
// a source may always replace its own idle connection. Otherwise the new
// one is refused.
type pool struct {
	max, perSource int

	mu       sync.Mutex
	slots    map[*slot]struct{}
	bySource map[string]int
}

func newPool(max, perSource int) *pool {
	return &pool{max: max, perSource: perSource, slots: map[*slot]struct{}{}, bySource: map[string]int{}}
}

// slot is one admitted connection.
type slot struct {
	p      *pool
	source string
	remote net.Addr
	evict  func() // closes the connection
	busy   int    // queries in flight
	idle   time.Time
	// arrived is when the last query or request arrived whole: a stream
	// that ends slow with nothing arrived since it began was stalled.
	arrived time.Time
	gone    bool
}

// admit takes a slot for a connection from remote, or says why not. The
// evicted connection, if any, is closed by the caller's evict function
// outside the pool's lock.
func (p *pool) admit(remote net.Addr, evict func()) (*slot, Reason, *slot) {
	src := sourceOf(remote)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySource[src] >= p.perSource {
		return nil, ReasonSourceLimit, nil
	}
	var victim *slot
	if len(p.slots) >= p.max {
		if victim = p.victim(src); victim == nil {
			return nil, ReasonConnLimit, nil
		}
		p.releaseLocked(victim)
	}
	sl := &slot{p: p, source: src, remote: remote, evict: evict, idle: time.Now()}
	p.slots[sl] = struct{}{}
	p.bySource[src]++
	return sl, "", victim
}

// victim is the connection to close to make room for one from src, or
// nil: one of the source holding the most, which must hold at least as
// many as src will (more, to lose a busy one), or src's own idle one;
// among a source's connections an idle one first, then the least
// recently active.
func (p *pool) victim(src string) *slot {
	want := p.bySource[src] + 1
	var best *slot
	for sl := range p.slots {
		n := p.bySource[sl.source]
		own := sl.source == src
		switch {
		case sl.busy == 0 && (n >= want || own):
		case sl.busy > 0 && n > want && !own:
		default:
			continue
		}
		if best == nil || betterVictim(sl, best) {
			best = sl
		}
	}
	return best
}

// betterVictim orders candidates: the source holding more, then idle
// before busy, then idle (or active) longer ago.
func betterVictim(a, b *slot) bool {
	na, nb := a.p.bySource[a.source], b.p.bySource[b.source]
	switch {
	case na != nb:
		return na > nb
	case (a.busy == 0) != (b.busy == 0):
		return a.busy == 0
	}
	return a.idle.Before(b.idle)
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

// admit takes a slot in p for a connection from remote, closing an idle
// one to make room if it must; nil means refused. Both are counted.
func (s *Server) admit(p *pool, listener, transport string, remote net.Addr, closeConn func()) *slot {
	sl, why, victim := p.admit(remote, closeConn)
	if victim != nil {
		victim.evict()
		s.refuse(listener, transport, victim.remote, ReasonEvicted, "idle longest at the connection limit")
	}
	if sl == nil {
		s.refuse(listener, transport, remote, why, "")
	}
	return sl
}

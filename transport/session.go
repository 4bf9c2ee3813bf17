package transport

import (
	"context"
	"crypto/tls"
	"io"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Session is what a client carries from one connection to the next: TLS
// session tickets, QUIC address-validation tokens (NEW_TOKEN) and the QUIC
// version each server negotiated. Share one Session between transports so
// a ticket from one connection resumes the next, as the papers' "resumed"
// and "0-RTT" conditions require. Safe for concurrent use.
type Session struct {
	tickets *ticketCache // nil: no resumption
	tokens  quic.TokenStore
	pin     bool

	mu       sync.Mutex
	versions map[string]quic.Version
}

// SessionConfig says which kinds of state a Session keeps.
type SessionConfig struct {
	Tickets  bool // TLS session tickets (resumption, 0-RTT)
	Tokens   bool // QUIC NEW_TOKEN tokens, skipping Retry on the next connection
	Versions bool // pin the QUIC version learned from the server
}

// NewSession returns a Session keeping what cfg names.
func NewSession(cfg SessionConfig) *Session {
	s := &Session{pin: cfg.Versions, versions: map[string]quic.Version{}}
	if cfg.Tickets {
		s.tickets = &ticketCache{inner: tls.NewLRUClientSessionCache(256), waiters: map[string]chan struct{}{}}
	}
	if cfg.Tokens {
		s.tokens = quic.NewLRUTokenStore(64, 4)
	}
	return s
}

// ticketView returns the ticket cache for one family of connections, or
// nil. Tickets are kept apart per family because TLS over TCP and QUIC
// store different state in them (quic-go adds transport parameters), and
// per QUIC ALPN because 0-RTT is only accepted for the ALPN that issued the
// ticket (RFC 8446 §4.2.10). DoT and DoH over TCP share one family, so a
// ticket from one resumes the other.
func (s *Session) ticketView(family string) tls.ClientSessionCache {
	if s == nil || s.tickets == nil {
		return nil
	}
	return &ticketView{c: s.tickets, ns: family}
}

// waitTicket waits until a ticket for key has been stored in the family
// since mark, or d passes. Closing a fresh connection the moment the answer
// arrives could drop the ticket that the next connection needs; the wait
// happens after the exchange is timed.
func (s *Session) waitTicket(ctx context.Context, family, key string, mark uint64, d time.Duration) {
	if s == nil || s.tickets == nil {
		return
	}
	s.tickets.wait(ctx, family+"|"+key, mark, d)
}

func (s *Session) ticketMark(family, key string) uint64 {
	if s == nil || s.tickets == nil {
		return 0
	}
	return s.tickets.count(family + "|" + key)
}

func (s *Session) version(addr string) (quic.Version, bool) {
	if s == nil || !s.pin {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.versions[addr]
	return v, ok
}

func (s *Session) learnVersion(addr string, v quic.Version) {
	if s == nil || !s.pin {
		return
	}
	s.mu.Lock()
	s.versions[addr] = v
	s.mu.Unlock()
}

type ticketCache struct {
	inner tls.ClientSessionCache

	mu       sync.Mutex
	puts     map[string]uint64
	waiters  map[string]chan struct{}
	lifetime time.Duration // of the last ticket stored
}

func (c *ticketCache) count(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts[key]
}

func (c *ticketCache) put(key string, cs *tls.ClientSessionState) {
	c.inner.Put(key, cs)
	if cs == nil {
		return
	}
	life := TicketLifetime(cs)
	c.mu.Lock()
	if c.puts == nil {
		c.puts = map[string]uint64{}
	}
	c.puts[key]++
	c.lifetime = life
	if ch, ok := c.waiters[key]; ok {
		close(ch)
		delete(c.waiters, key)
	}
	c.mu.Unlock()
}

func (c *ticketCache) wait(ctx context.Context, key string, mark uint64, d time.Duration) {
	c.mu.Lock()
	if c.puts[key] > mark {
		c.mu.Unlock()
		return
	}
	ch, ok := c.waiters[key]
	if !ok {
		ch = make(chan struct{})
		c.waiters[key] = ch
	}
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// TicketLifetime is the lifetime the server gave its last session ticket
// (RFC 8446 §4.6.1), or zero when none arrived or the Session keeps none.
func (s *Session) TicketLifetime() time.Duration {
	if s == nil || s.tickets == nil {
		return 0
	}
	s.tickets.mu.Lock()
	defer s.tickets.mu.Unlock()
	return s.tickets.lifetime
}

// TicketLifetime reads a ticket's lifetime. crypto/tls keeps it in the
// session state's unexported createdAt and useBy (seconds; useBy is
// createdAt plus the lifetime on a client) and exports no accessor, so
// reflection reads them; a Go release that renames them gives zero.
func TicketLifetime(cs *tls.ClientSessionState) time.Duration {
	_, st, err := cs.ResumptionState()
	if err != nil || st == nil {
		return 0
	}
	v := reflect.ValueOf(st).Elem()
	created, useBy := v.FieldByName("createdAt"), v.FieldByName("useBy")
	if !created.IsValid() || !useBy.IsValid() || created.Kind() != reflect.Uint64 || useBy.Kind() != reflect.Uint64 || useBy.Uint() < created.Uint() {
		return 0
	}
	return time.Duration(useBy.Uint()-created.Uint()) * time.Second
}

type ticketView struct {
	c  *ticketCache
	ns string
}

func (v *ticketView) Get(key string) (*tls.ClientSessionState, bool) {
	return v.c.inner.Get(v.ns + "|" + key)
}

func (v *ticketView) Put(key string, cs *tls.ClientSessionState) { v.c.put(v.ns+"|"+key, cs) }

var (
	keyLogOnce sync.Once
	keyLogFile io.Writer
)

// KeyLog returns w, or the file SSLKEYLOGFILE names (opened once, for
// appending), so captures of doxlab's traffic open decrypted in Wireshark,
// as Chromium's do with the same variable.
func KeyLog(w io.Writer) io.Writer {
	if w != nil {
		return w
	}
	keyLogOnce.Do(func() {
		if name := os.Getenv("SSLKEYLOGFILE"); name != "" {
			if f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
				keyLogFile = f
			}
		}
	})
	return keyLogFile
}

// Condition names what a new connection may carry over from earlier ones:
// the papers' measurement conditions, shared by measure and the server's
// forwarder.
type Condition struct {
	Name    string `json:"name"`
	Tickets bool   `json:"tickets"` // TLS session resumption
	Tokens  bool   `json:"tokens"`  // QUIC NEW_TOKEN (no Retry)
	Version bool   `json:"version"` // the QUIC version learned (no Version Negotiation)
	ZeroRTT bool   `json:"zero_rtt"`
}

// Conditions are the named ones; "fresh" reuses nothing. The PAM paper's
// own DoQ measurement is "pam": version and token, but no ticket.
var Conditions = map[string]Condition{
	"fresh":   {Name: "fresh"},
	"pam":     {Name: "pam", Tokens: true, Version: true},
	"resumed": {Name: "resumed", Tickets: true, Tokens: true, Version: true},
	"0rtt":    {Name: "0rtt", Tickets: true, Tokens: true, Version: true, ZeroRTT: true},
}

// Apply sets opts for new connections under c, with a new Session that
// the transports built from opts share.
func (c Condition) Apply(opts *Options) {
	opts.Reuse = false
	opts.Session = nil
	if c.Tickets || c.Tokens || c.Version {
		opts.Session = NewSession(SessionConfig{Tickets: c.Tickets, Tokens: c.Tokens, Versions: c.Version})
	}
	opts.ZeroRTT = c.ZeroRTT
}

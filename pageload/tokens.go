package pageload

import (
	"crypto/tls"
	"sync"

	"github.com/quic-go/quic-go"
)

// How the loader keeps QUIC NEW_TOKEN tokens (RFC 9000 §8.1.3) for later
// connections: Config.Tokens.
const (
	// TokensKeep keeps the newest token from each server, as quic-go's
	// own token store does: the client a server's tokens are made for.
	TokensKeep = "keep"
	// TokensChromium keeps a token as Chromium's QUIC session cache does
	// (quiche's QuicClientSessionCache): a token belongs to the cache's
	// entry for the server, and the entry is replaced when a new
	// connection's session ticket is stored, once that connection's
	// SETTINGS are in. A token that arrives before its own connection's
	// ticket lands on the old entry, or on none, and is lost; one that
	// arrives after is kept, and presented once. The server's frame order
	// decides, so Chromium presents one in about half its resumed loads.
	TokensChromium = "chromium"
)

// tokenKeeper holds a loader's tokens across loads.
type tokenKeeper struct {
	mode string
	keep quic.TokenStore // TokensKeep

	mu      sync.Mutex
	entries map[string]*tokenEntry // TokensChromium: by server name
}

// tokenEntry is Chromium's cache entry for one server: made by one
// connection's ticket, with the token stored on it since.
type tokenEntry struct {
	owner *connTokens
	token *quic.ClientToken
}

func newTokenKeeper(mode string) *tokenKeeper {
	return &tokenKeeper{mode: mode, keep: quic.NewLRUTokenStore(64, 4), entries: map[string]*tokenEntry{}}
}

// forConn returns the view one QUIC connection has of the tokens (its
// QUIC config's token store) and of the tickets in sessions (Tickets,
// its TLS config's session cache), so the keeper sees which connection
// stored what, in the order its frames were handled.
func (k *tokenKeeper) forConn(sessions tls.ClientSessionCache) *connTokens {
	return &connTokens{k: k, sessions: sessions}
}

// connTokens is one connection's view: a quic.TokenStore.
type connTokens struct {
	k        *tokenKeeper
	sessions tls.ClientSessionCache

	// Guarded by k.mu.
	presented bool   // the connection's Initial carried a token
	offered   bool   // its ClientHello offered a ticket that allows 0-RTT
	settled   bool   // its SETTINGS are in (Chromium inserts after them)
	pending   string // a ticket stored before they were
}

// Presented says whether the connection's first packet carried a token.
func (c *connTokens) Presented() bool {
	c.k.mu.Lock()
	defer c.k.mu.Unlock()
	return c.presented
}

// EarlyTicket says whether the connection was handed a ticket that
// allows 0-RTT.
func (c *connTokens) EarlyTicket() bool {
	c.k.mu.Lock()
	defer c.k.mu.Unlock()
	return c.offered
}

// Tickets is the connection's session cache.
func (c *connTokens) Tickets() tls.ClientSessionCache { return connTickets{c} }

type connTickets struct{ c *connTokens }

// Get hands the handshake a ticket, and notes whether the ticket allows
// early data: a connection dialled early then offers 0-RTT.
func (t connTickets) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := t.c.sessions.Get(key)
	if ok && cs != nil {
		if _, st, err := cs.ResumptionState(); err == nil && st != nil && st.EarlyData {
			t.c.k.mu.Lock()
			t.c.offered = true
			t.c.k.mu.Unlock()
		}
	}
	return cs, ok
}

func (t connTickets) Put(key string, cs *tls.ClientSessionState) {
	c := t.c
	c.sessions.Put(key, cs)
	k := c.k
	if k.mode != TokensChromium {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case cs == nil:
		delete(k.entries, key)
	case !c.settled:
		c.pending = key
	default:
		c.insert(key)
	}
}

// insert is Chromium's Insert of this connection's ticket: its transport
// parameters differ from any other connection's, so an entry another
// connection made is replaced, with its token. Called with k.mu held.
func (c *connTokens) insert(key string) {
	if e := c.k.entries[key]; e == nil || e.owner != c {
		c.k.entries[key] = &tokenEntry{owner: c}
	}
}

// Settled tells the view the connection's SETTINGS arrived.
func (c *connTokens) Settled() {
	k := c.k
	k.mu.Lock()
	defer k.mu.Unlock()
	c.settled = true
	if c.pending != "" {
		c.insert(c.pending)
		c.pending = ""
	}
}

func (c *connTokens) Pop(key string) *quic.ClientToken {
	k := c.k
	var t *quic.ClientToken
	if k.mode == TokensKeep {
		t = k.keep.Pop(key)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.entries[key]; k.mode == TokensChromium && e != nil {
		t, e.token = e.token, nil
	}
	c.presented = t != nil
	return t
}

func (c *connTokens) Put(key string, t *quic.ClientToken) {
	k := c.k
	if k.mode == TokensKeep {
		k.keep.Put(key, t)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.entries[key]; e != nil {
		e.token = t
	}
}

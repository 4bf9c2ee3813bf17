package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/dnswire"
)

// mux matches answers to queries by message ID on one connection, so many
// queries can be in flight and answers may arrive in any order (RFC 7766
// §7 pipelining). One reader goroutine timestamps each message as it is
// read off the socket.
type mux struct {
	write func([]byte) (time.Time, error) // frames and writes one message; its first packet's kernel send time, if known
	read  func() ([]byte, error)          // reads one message
	// first, if set, is when the octets of the message read last began
	// to arrive (see stamper).
	first func() time.Time

	mu      sync.Mutex
	wmu     sync.Mutex
	pending map[uint16]chan arrival
	// abandoned are the IDs of queries given up on (timed out or
	// cancelled) whose answers may still come: no new query takes one,
	// or a late answer would pass for its own. An answer frees its ID.
	abandoned map[uint16]bool
	// recent are the IDs answered last, held back likewise: a server (or
	// a network, on UDP) may send an answer twice, and the copy would pass
	// for the answer to the next query given the ID.
	recent     [maxRecent]uint16
	recentSet  map[uint16]int // how many times each is in recent
	recentNext int            // where the next goes
	recentLen  int
	err        error // why the reader stopped; later exchanges fail with it
	done       chan struct{}
}

// maxRecent is how many of the IDs answered last a connection holds back.
const maxRecent = 256

// maxAbandoned bounds the IDs held back on one connection; past it one
// of them is let go, taken to be lost for good (the server dropped it).
const maxAbandoned = 1024

type arrival struct {
	msg   []byte
	at    time.Time // the message was whole
	first time.Time // its first octet arrived; zero where not known
}

func newMux(write func([]byte) (time.Time, error), read func() ([]byte, error), first func() time.Time, strict bool) *mux {
	m := &mux{write: write, read: read, first: first, pending: map[uint16]chan arrival{}, abandoned: map[uint16]bool{}, recentSet: map[uint16]int{},
		done: make(chan struct{})}
	go m.loop(strict)
	return m
}

// loop delivers messages. Unknown IDs are dropped: on UDP they may be
// spoofed or late, on a reused stream they answer a query that timed out.
// With strict (stream transports), a message too short to carry an ID
// breaks the framing and ends the connection.
func (m *mux) loop(strict bool) {
	defer close(m.done)
	for {
		msg, err := m.read()
		at := time.Now()
		var first time.Time
		if m.first != nil {
			first = m.first()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errClosed
			}
			m.fail(err)
			return
		}
		if len(msg) < dnswire.MinMsg {
			if strict {
				m.fail(malformed("%d-octet message is shorter than a DNS header", len(msg)))
				return
			}
			continue
		}
		id := binary.BigEndian.Uint16(msg)
		m.mu.Lock()
		ch, ok := m.pending[id]
		if ok {
			delete(m.pending, id)
			m.answered(id)
		}
		delete(m.abandoned, id) // answered at last: the ID is free
		m.mu.Unlock()
		if ok {
			ch <- arrival{msg: msg, at: at, first: first}
		}
	}
}

func (m *mux) fail(err error) {
	m.mu.Lock()
	m.err = err
	m.pending = nil
	m.mu.Unlock()
}

// alive reports whether the connection can take another query.
func (m *mux) alive() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err == nil
}

// exchange sends wire (whose ID it may change to one not in flight) and
// waits for the answer with the same ID. sent is taken just before the
// write, and wireSent (the kernel's send time, if known) by it, under the
// write lock, so both are right for each of several concurrent exchanges.
func (m *mux) exchange(ctx context.Context, wire []byte) (a arrival, sent, wireSent time.Time, err error) {
	ch := make(chan arrival, 1)
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return arrival{}, sent, wireSent, err
	}
	id := binary.BigEndian.Uint16(wire)
	for {
		if _, busy := m.pending[id]; !busy && !m.abandoned[id] && m.recentSet[id] == 0 {
			break
		}
		id = uint16(rand.UintN(1 << 16))
	}
	binary.BigEndian.PutUint16(wire, id)
	m.pending[id] = ch
	m.mu.Unlock()

	m.wmu.Lock()
	sent = time.Now()
	wireSent, err = m.write(wire)
	m.wmu.Unlock()
	if err != nil {
		m.forget(id)
		return arrival{}, sent, wireSent, err
	}
	select {
	case a = <-ch:
		return a, sent, wireSent, nil
	case <-m.done:
		select {
		case a = <-ch: // delivered just before the reader stopped
			return a, sent, wireSent, nil
		default:
		}
		m.mu.Lock()
		err = m.err
		m.mu.Unlock()
		return arrival{}, sent, wireSent, err
	case <-ctx.Done():
		m.forget(id)
		m.abandon(id)
		return arrival{}, sent, wireSent, ctx.Err()
	}
}

func (m *mux) forget(id uint16) {
	m.mu.Lock()
	if m.pending != nil {
		delete(m.pending, id)
	}
	m.mu.Unlock()
}

// answered holds id back from the next queries, as one of the IDs
// answered last. The caller holds mu.
func (m *mux) answered(id uint16) {
	if m.recentLen == maxRecent { // the oldest goes
		old := m.recent[m.recentNext]
		if m.recentSet[old]--; m.recentSet[old] == 0 {
			delete(m.recentSet, old)
		}
	} else {
		m.recentLen++
	}
	m.recent[m.recentNext] = id
	m.recentSet[id]++
	m.recentNext = (m.recentNext + 1) % maxRecent
}

// abandon holds id back from new queries until its answer comes.
func (m *mux) abandon(id uint16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.abandoned) >= maxAbandoned {
		for old := range m.abandoned {
			delete(m.abandoned, old)
			break
		}
	}
	m.abandoned[id] = true
}

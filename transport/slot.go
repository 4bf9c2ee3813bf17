package transport

import "sync"

// slot holds the one connection a transport keeps with Reuse. Dialing
// happens under its lock, so concurrent exchanges wait for the connection
// and share it instead of each opening their own. Without Reuse each
// exchange dials its own, in parallel: a stub forwarding a page's twenty
// lookups at once must not queue them behind one another's handshakes.
type slot[C comparable] struct {
	mu   sync.Mutex
	conn C
}

// get returns the kept connection while alive says it is, or dials a new
// one (kept only with reuse). reused says which happened.
func (s *slot[C]) get(reuse bool, alive func(C) bool, dial func() (C, error)) (c C, reused bool, err error) {
	if !reuse {
		c, err = dial()
		return c, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero C
	if s.conn != zero && alive(s.conn) {
		return s.conn, true, nil
	}
	if c, err = dial(); err != nil {
		return zero, false, err
	}
	s.conn = c
	return c, false, nil
}

// put keeps c as the connection to reuse.
func (s *slot[C]) put(c C) {
	s.mu.Lock()
	s.conn = c
	s.mu.Unlock()
}

// drop forgets c if it is the kept connection.
func (s *slot[C]) drop(c C) {
	s.mu.Lock()
	if s.conn == c {
		var zero C
		s.conn = zero
	}
	s.mu.Unlock()
}

// take removes and returns the kept connection, for Close.
func (s *slot[C]) take() (C, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero C
	c := s.conn
	s.conn = zero
	return c, c != zero
}

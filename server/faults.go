package server

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// faults decides, per query, the delay and whether to drop it.
type faults struct {
	cfg   Faults
	names map[string]time.Duration
	n     atomic.Uint64
	mu    sync.Mutex
	rnd   *rand.Rand
}

func newFaults(c Faults) *faults {
	f := &faults{cfg: c, names: map[string]time.Duration{}, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	for n, d := range c.DelayNames {
		f.names[dns.CanonicalName(strings.TrimSpace(n))] = d
	}
	return f
}

func (f *faults) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rnd.Float64() < p
}

// decide returns the delay for the query and whether to drop it.
func (f *faults) decide(qname string) (delay time.Duration, drop bool) {
	n := f.n.Add(1)
	if f.chance(f.cfg.DropProbability) {
		return 0, true
	}
	delay = f.cfg.Delay
	if f.cfg.DelayEvery > 0 && n%uint64(f.cfg.DelayEvery) == 0 {
		delay += f.cfg.DelayEveryBy
	}
	if f.chance(f.cfg.DelayProbability) {
		delay += f.cfg.DelayEveryBy
	}
	if d, ok := f.names[dns.CanonicalName(qname)]; ok {
		delay += d
	}
	return delay, false
}

// quick reports whether every answer is ready at once: no injected
// delay and no forwarding, so a listener may answer where it reads the
// query instead of in a goroutine of its own.
func (s *Server) quick() bool {
	f := s.cfg.Faults
	return f.Delay == 0 && f.DelayEvery == 0 && f.DelayProbability == 0 && len(f.DelayNames) == 0 && s.ans.fwd == nil
}

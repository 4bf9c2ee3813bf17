package dnsrtt

import (
	"context"
	"math"
	"sync"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// Group is the samples of one access profile, vantage point, resolver,
// transport and condition, as distributions: every table, figure and
// finding of the section is drawn from cells, pooled. A store of 10
// million samples is read once, row by row, into cells, and never held.
type Group struct {
	Profile   string // "" on a real network
	Vantage   string // "" outside campaigns
	Where     string // what is known of the vantage point
	Target    string
	Transport string
	Condition string
	N         int // samples, answered or not (cancelled tasks are none)
	Answered  int // samples whose rcode answers (measure.Answers)
	// Failed counts the samples not answered by what they failed with:
	// an rcode not taken (REFUSED), or a status (timeout, ...). They are
	// never timed.
	Failed map[string]int
	// Each distribution is over the samples that have the value:
	Ms        *stats.Dist // total ms of the answered samples in RTTs too (OK)
	MsAll     *stats.Dist // total ms of every answered sample (resolver ranking)
	RTT       *stats.Dist // total in RTTs of the probe, where the probe answered
	Handshake *stats.Dist // in RTTs of the probe, 0 where there is none (UDP)
	Resolve   *stats.Dist // in RTTs of the probe
	Probe     *stats.Dist // the probed RTT, ms
	Serial    *stats.Dist // SerializationMs, where the profile is known
	Wire      *stats.Dist // on the wire, ms (kernel timestamps)
	Client    *stats.Dist // total minus wire, ms: the client's own time
	// Link is the profile the runs recorded, if any.
	Link *testbed.Profile
	hdr  int64 // headerOctets(Transport), once worked out
}

func newGroup() *Group {
	return &Group{Failed: map[string]int{}, Ms: stats.NewDist(), MsAll: stats.NewDist(), RTT: stats.NewDist(), Handshake: stats.NewDist(), Resolve: stats.NewDist(),
		Probe: stats.NewDist(), Serial: stats.NewDist(), Wire: stats.NewDist(), Client: stats.NewDist()}
}

// dists are the cell's distributions, for merging.
func (c *Group) dists() []*stats.Dist {
	return []*stats.Dist{c.Ms, c.MsAll, c.RTT, c.Handshake, c.Resolve, c.Probe, c.Serial, c.Wire, c.Client}
}

// merge adds o's samples to c.
func (c *Group) merge(o *Group) {
	c.N += o.N
	c.Answered += o.Answered
	for k, n := range o.Failed {
		c.Failed[k] += n
	}
	mine := c.dists()
	for i, d := range o.dists() {
		mine[i].Merge(d)
	}
	if c.Where == "" {
		c.Where = o.Where
	}
	if c.Link == nil {
		c.Link = o.Link
	}
}

// add adds one sample, measured on link (nil if unknown): timed if it
// answered, else counted by what it failed with (outcome).
func (c *Group) add(r *store.Row, link *testbed.Profile, outcome string) {
	c.N++
	if c.Where == "" {
		c.Where = where(r)
	}
	if link != nil {
		c.Link = link
	}
	if r.ProbeRTTMs != nil { // the probe answered, whatever the exchange did
		c.Probe.Add(*r.ProbeRTTMs)
	}
	if outcome != "" {
		c.Failed[outcome]++
		return
	}
	c.Answered++
	if r.TotalMs != nil {
		c.MsAll.Add(*r.TotalMs)
	}
	if r.TotalRTT == nil {
		return
	}
	c.RTT.Add(*r.TotalRTT)
	c.Handshake.Add(deref(r.HandshakeRTT))
	c.Resolve.Add(deref(r.ResolveRTT))
	if r.TotalMs == nil {
		return
	}
	c.Ms.Add(*r.TotalMs)
	if link != nil {
		if c.hdr == 0 {
			c.hdr = headerOctets(c.Transport)
		}
		c.Serial.Add(serializationMs(r, link, c.hdr))
	}
	if r.WireMs != nil {
		c.Wire.Add(*r.WireMs)
		c.Client.Add(*r.TotalMs - *r.WireMs)
	}
}

// cellKey is what tells cells apart.
type cellKey struct{ profile, vantage, target, transport, condition string }

// MaxCells bounds the cells a report holds apart (a vantage point ×
// resolver × transport × condition × profile each, about 5 KB): past it,
// the samples of a cell not yet held go to their vantage point's,
// transport's, condition's and profile's OtherResolvers cell. Every
// pooled table, figure and finding still counts them; the per-resolver
// and per-vantage rows of the resolvers past the bound are in doxlab
// export. A report's memory is bounded by this, not by the store.
var MaxCells = 50000

// OtherResolvers is the target of the cells that hold what MaxCells
// left no cell of its own for.
const OtherResolvers = "(other resolvers)"

// cells gathers rows into cells, in the order first seen.
type cells struct {
	byKey map[cellKey]*Group
	order []*Group
	links map[string]*testbed.Profile // by run ID, made once: add runs per row
	// skipped counts rows holding a non-finite duration: doxlab writes
	// none, so they were written around it, and are left out.
	skipped int
	// folded counts rows that went to an OtherResolvers cell.
	folded int
	// canceled counts rows of tasks an interrupted run cancelled: no
	// samples at all.
	canceled int
	answers  measure.Answers
	// The last row's run and its link: a run's rows come together, and
	// a map's lookup for each of ten million rows is not free.
	lastRun  string
	lastLink *testbed.Profile
	lastSet  bool
}

// newCells gathers rows measured on the runs' profiles (by run ID),
// timing those answers takes as answered.
func newCells(profiles map[string]testbed.Profile, answers measure.Answers) *cells {
	links := map[string]*testbed.Profile{}
	for id, p := range profiles {
		links[id] = &p
	}
	return &cells{byKey: map[cellKey]*Group{}, links: links, answers: answers}
}

// empty is cells of none, on cs's profiles and answers (shared, not
// copied: they are only read).
func (cs *cells) empty() *cells {
	return &cells{byKey: map[cellKey]*Group{}, links: cs.links, answers: cs.answers}
}

func (cs *cells) add(r *store.Row) {
	if !finite(r) {
		cs.skipped++
		return
	}
	if transport.Status(r.Status) == transport.StatusCanceled {
		cs.canceled++
		return
	}
	k := cellKey{r.Profile, r.Vantage, r.Target, r.Transport, r.Condition}
	c, ok := cs.byKey[k]
	if !ok {
		if len(cs.byKey) >= MaxCells {
			k.target = OtherResolvers
			cs.folded++
		}
		c = cs.cell(k)
	}
	if !cs.lastSet || r.RunID != cs.lastRun {
		cs.lastRun, cs.lastLink, cs.lastSet = r.RunID, cs.links[r.RunID], true
	}
	c.add(r, cs.lastLink, cs.answers.Outcome(transport.Status(r.Status), r.Rcode))
}

// cell is k's cell, made if need be.
func (cs *cells) cell(k cellKey) *Group {
	c, ok := cs.byKey[k]
	if !ok {
		c = newGroup()
		c.Profile, c.Vantage, c.Target, c.Transport, c.Condition = k.profile, k.vantage, k.target, k.transport, k.condition
		cs.byKey[k] = c
		cs.order = append(cs.order, c)
	}
	return c
}

// merge adds another reader's cells, within MaxCells.
func (cs *cells) merge(o *cells) {
	cs.skipped += o.skipped
	cs.folded += o.folded
	cs.canceled += o.canceled
	for _, g := range o.order {
		k := cellKey{g.Profile, g.Vantage, g.Target, g.Transport, g.Condition}
		if _, ok := cs.byKey[k]; !ok {
			if len(cs.byKey) < MaxCells {
				cs.byKey[k] = g
				cs.order = append(cs.order, g)
				continue
			}
			k.target = OtherResolvers
			cs.folded += g.N
		}
		cs.cell(k).merge(g)
	}
}

// NewSamples is rows gathered into cells, with the profile of each run
// that has one (StoredProfiles), NOERROR and NXDOMAIN taken as answers.
func NewSamples(rows []store.Row, profiles map[string]testbed.Profile) *Samples {
	cs := newCells(profiles, measure.DefaultAnswers())
	for i := range rows {
		cs.add(&rows[i])
	}
	s := cs.samples()
	s.rescan = func(fn func(*store.Row)) error {
		for i := range rows {
			fn(&rows[i])
		}
		return nil
	}
	return s
}

// samples are the gathered cells.
func (cs *cells) samples() *Samples {
	return &Samples{Groups: cs.order, Skipped: cs.skipped, Folded: cs.folded, Canceled: cs.canceled, OKRcodes: cs.answers.Rcodes(), answers: cs.answers}
}

// MaxExactCompare is how many values a side of a comparison reads again
// from the store when values binned to 0.1 % leave its verdict open
// (stats.Comparison.Undecided): 2^21, 16 MiB a side. Past it the
// comparison stays undecided, and says so.
var MaxExactCompare = 1 << 21

// compare compares two pooled distributions, binned past
// stats.ExactLimit; where the bins leave the verdict open, it reads the
// samples again, those of base and other (value says a row's value and
// whether it is one), and runs the exact test.
func (s *Samples) compare(base, other *stats.Dist, inBase, inOther func(*store.Row) bool, value func(*store.Row) (float64, bool)) stats.Comparison {
	c := stats.CompareDists(base, other)
	if !c.Undecided() || s.rescan == nil || base.N() > MaxExactCompare || other.N() > MaxExactCompare {
		return c
	}
	var b, o []float64
	err := s.rescan(func(r *store.Row) {
		if !finite(r) || s.answers.Outcome(transport.Status(r.Status), r.Rcode) != "" {
			return
		}
		v, ok := value(r)
		if !ok {
			return
		}
		if inBase(r) {
			b = append(b, v)
		}
		if inOther(r) {
			o = append(o, v)
		}
	})
	if err != nil || len(b) != base.N() || len(o) != other.N() {
		return c // the store changed, or cannot be read again: binned it stays
	}
	return stats.Compare(b, o)
}

// finite says whether every duration r holds is a number.
func finite(r *store.Row) bool {
	for _, p := range []*float64{r.ProbeRTTMs, r.HandshakeMs, r.QueryMs, r.TotalMs, r.HandshakeRTT, r.ResolveRTT, r.TotalRTT, r.WireMs, r.WireQueryMs} {
		if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0)) {
			return false
		}
	}
	return true
}

// LoadSamples reads the DNS samples the filter selects, of runs of any
// kind (the report draws measure's and campaigns' samples too), in one
// streaming pass over the store's typed columns.
func LoadSamples(ctx context.Context, st *store.Store, f store.Filter) (*Samples, error) {
	profiles, err := StoredProfiles(ctx, st)
	if err != nil {
		return nil, err
	}
	answers, err := measure.ParseAnswers(f.OKRcodes)
	if err != nil {
		return nil, err
	}
	var all *cells
	if f.Vantage == "" {
		all, _, _, err = summarized(ctx, st, f, profiles, answers)
	} else { // a vantage point's rows: what the report of one reads is read
		all, err = scanCells(ctx, st, f, profiles, answers)
	}
	if err != nil {
		return nil, err
	}
	s := all.samples()
	s.rescan = func(fn func(*store.Row)) error {
		var mu sync.Mutex
		return st.EachTiming(ctx, f, func() func(*store.Row) error {
			return func(r *store.Row) error {
				mu.Lock()
				defer mu.Unlock()
				fn(r)
				return nil
			}
		})
	}
	return s, nil
}

// pool merges the cells by key, the keys in the order first seen.
func pool[K comparable](cells []*Group, key func(*Group) K) ([]K, map[K]*Group) {
	var keys []K
	out := map[K]*Group{}
	for _, c := range cells {
		k := key(c)
		p, ok := out[k]
		if !ok {
			p = newGroup()
			p.Profile, p.Vantage, p.Target, p.Transport, p.Condition = c.Profile, c.Vantage, c.Target, c.Transport, c.Condition
			out[k] = p
			keys = append(keys, k)
		}
		p.merge(c)
	}
	return keys, out
}

// filter is the cells keep keeps.
func filter(cells []*Group, keep func(*Group) bool) []*Group {
	var out []*Group
	for _, c := range cells {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

package dnsrtt

import (
	"context"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
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
	N         int // samples, answered or not
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
}

func newGroup() *Group {
	return &Group{Ms: stats.NewDist(), MsAll: stats.NewDist(), RTT: stats.NewDist(), Handshake: stats.NewDist(), Resolve: stats.NewDist(),
		Probe: stats.NewDist(), Serial: stats.NewDist(), Wire: stats.NewDist(), Client: stats.NewDist()}
}

// OK is the number of answered samples with an RTT.
func (c *Group) OK() int { return c.Ms.N() }

// dists are the cell's distributions, for merging.
func (c *Group) dists() []*stats.Dist {
	return []*stats.Dist{c.Ms, c.MsAll, c.RTT, c.Handshake, c.Resolve, c.Probe, c.Serial, c.Wire, c.Client}
}

// merge adds o's samples to c.
func (c *Group) merge(o *Group) {
	c.N += o.N
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

// add adds one sample, measured on link (nil if unknown).
func (c *Group) add(r *store.Row, link *testbed.Profile) {
	c.N++
	if c.Where == "" {
		c.Where = where(r)
	}
	if link != nil {
		c.Link = link
	}
	if r.ProbeRTTMs != nil {
		c.Probe.Add(*r.ProbeRTTMs)
	}
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
		c.Serial.Add(SerializationMs(*r, *link))
	}
	if r.WireMs != nil {
		c.Wire.Add(*r.WireMs)
		c.Client.Add(*r.TotalMs - *r.WireMs)
	}
}

// cellKey is what tells cells apart.
type cellKey struct{ profile, vantage, target, transport, condition string }

// cells gathers rows into cells, in the order first seen.
type cells struct {
	byKey map[cellKey]*Group
	order []*Group
	links map[string]*testbed.Profile // by run ID, made once: add runs per row
}

// newCells gathers rows measured on the runs' profiles (by run ID).
func newCells(profiles map[string]testbed.Profile) *cells {
	links := map[string]*testbed.Profile{}
	for id, p := range profiles {
		links[id] = &p
	}
	return &cells{byKey: map[cellKey]*Group{}, links: links}
}

func (cs *cells) add(r *store.Row) {
	k := cellKey{r.Profile, r.Vantage, r.Target, r.Transport, r.Condition}
	c, ok := cs.byKey[k]
	if !ok {
		c = newGroup()
		c.Profile, c.Vantage, c.Target, c.Transport, c.Condition = k.profile, k.vantage, k.target, k.transport, k.condition
		cs.byKey[k] = c
		cs.order = append(cs.order, c)
	}
	c.add(r, cs.links[r.RunID])
}

// NewSamples is rows gathered into cells, with the profile of each run
// that has one (StoredProfiles).
func NewSamples(rows []store.Row, profiles map[string]testbed.Profile) *Samples {
	cs := newCells(profiles)
	for i := range rows {
		cs.add(&rows[i])
	}
	return &Samples{Groups: cs.order}
}

// LoadSamples reads the DNS samples the filter selects, of runs of any
// kind (the report draws measure's and campaigns' samples too), in one
// streaming pass over the store's typed columns.
func LoadSamples(ctx context.Context, st *store.Store, f store.Filter) (*Samples, error) {
	profiles, err := StoredProfiles(ctx, st)
	if err != nil {
		return nil, err
	}
	var parts []*cells // one per reader of the store
	err = st.EachTiming(ctx, f, func() func(*store.Row) error {
		cs := newCells(profiles)
		parts = append(parts, cs)
		return func(r *store.Row) error {
			cs.add(r)
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	all := parts[0]
	for _, cs := range parts[1:] {
		for _, g := range cs.order {
			k := cellKey{g.Profile, g.Vantage, g.Target, g.Transport, g.Condition}
			if mine, ok := all.byKey[k]; ok {
				mine.merge(g)
			} else {
				all.byKey[k] = g
				all.order = append(all.order, g)
			}
		}
	}
	return &Samples{Groups: all.order}, nil
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

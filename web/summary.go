package web

import (
	"cmp"
	"slices"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/measure"
)

// Cell is one cell of the web experiment: the medians of one profile
// × page × DNS transport × H3 mode (× stub state × DNS mode).
type Cell struct {
	Profile, Page, Transport, H3, StubState, DNSMode string
	N, OK                                            int
	PLT, FCP, DNS                                    float64 // medians, ms
	Real0RTT, Resumed                                float64 // shares of OK loads whose H3 connection really used 0-RTT, resumed
	PLTs, FCPs                                       []float64
	// RelPLT and RelFCP are the median relative increases over the
	// baseline cell (DoUDP + H3 1-RTT, same profile, page, stub state and
	// DNS mode), in percent: the cross-layer paper's Fig. 8-12.
	RelPLT, RelFCP float64
	// RelPLTs are each load's PLT relative to the baseline's median.
	RelPLTs []float64
}

// Baseline is the cell the others are compared with.
func (c Cell) Baseline() bool { return c.Transport == "udp" && c.H3 == "1rtt" }

// Summarize groups page loads into cells, in a stable order.
func Summarize(samples []*Sample) []Cell {
	type key struct{ p, g, t, h, s, d string }
	cells := map[key]*Cell{}
	dns := map[key][]float64{}
	var keys []key
	for _, x := range samples {
		k := key{x.Profile, x.Page, x.Transport, x.H3, x.StubState, x.DNSMode}
		c, ok := cells[k]
		if !ok {
			c = &Cell{Profile: k.p, Page: k.g, Transport: k.t, H3: k.h, StubState: k.s, DNSMode: k.d}
			cells[k] = c
			keys = append(keys, k)
		}
		c.N++
		if x.Status != "ok" {
			continue
		}
		c.OK++
		c.PLTs = append(c.PLTs, x.PLTMs)
		c.FCPs = append(c.FCPs, x.FCPMs)
		dns[k] = append(dns[k], x.DNSMs)
		if x.H3Used0RTT {
			c.Real0RTT++
		}
		if x.H3Resumed {
			c.Resumed++
		}
	}
	for k, c := range cells {
		c.PLT, c.FCP, c.DNS = measure.Median(c.PLTs), measure.Median(c.FCPs), measure.Median(dns[k])
		if c.OK > 0 {
			c.Real0RTT /= float64(c.OK)
			c.Resumed /= float64(c.OK)
		}
	}
	for k, c := range cells {
		base, ok := cells[key{k.p, k.g, "udp", "1rtt", k.s, k.d}]
		if !ok || base.PLT == 0 || base.FCP == 0 {
			continue
		}
		c.RelPLT = 100 * (c.PLT/base.PLT - 1)
		c.RelFCP = 100 * (c.FCP/base.FCP - 1)
		for _, v := range c.PLTs {
			c.RelPLTs = append(c.RelPLTs, 100*(v/base.PLT-1))
		}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.d, b.d), order.Compare(a.s, b.s), order.Compare(a.p, b.p),
			order.Compare(a.g, b.g), order.Compare(a.t, b.t), order.Compare(a.h, b.h))
	})
	out := make([]Cell, len(keys))
	for i, k := range keys {
		out[i] = *cells[k]
	}
	return out
}

package dnsrtt

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/internal/printable"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/store"
)

// VantageStat is a vantage point × resolver × transport of the campaigns
// measured from several vantage points: all conditions together.
type VantageStat struct {
	Vantage   string
	Where     string // location, network, AS and address, as known
	Target    string
	Transport string
	N, OK     int
	ProbeMs   float64 // the median RTT probed to the resolver
	Probe     stats.Summary
	MedianMs  float64
	P95Ms     float64
	Ms        stats.Summary // the total in ms
	MedianRTT float64
	P95RTT    float64
	RTT       stats.Summary // the total in RTTs of the probe
}

// vantages are the vantage points the samples name, in order.
func (s *Samples) vantages() []string {
	var out []string
	for _, c := range s.Groups {
		if c.Vantage != "" && !slices.Contains(out, c.Vantage) {
			out = append(out, c.Vantage)
		}
	}
	slices.SortFunc(out, order.Compare)
	return out
}

// ByVantage summarizes the samples measured from vantage points, per
// vantage point, resolver and transport.
func (s *Samples) ByVantage() []VantageStat {
	type key struct{ v, t, tr string }
	cells := filter(s.Groups, func(c *Group) bool { return c.Vantage != "" })
	keys, groups := pool(cells, func(c *Group) key { return key{c.Vantage, c.Target, c.Transport} })
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.v, b.v), order.Compare(a.t, b.t), order.Compare(a.tr, b.tr))
	})
	var out []VantageStat
	for _, k := range keys {
		g := groups[k]
		st := VantageStat{Vantage: k.v, Where: g.Where, Target: k.t, Transport: k.tr, N: g.N, OK: g.OK()}
		st.Probe = g.Probe.Summary()
		st.ProbeMs = st.Probe.Median
		st.Ms = g.Ms.Summary()
		st.MedianMs, st.P95Ms = st.Ms.Median, st.Ms.P95
		st.RTT = g.RTT.Summary()
		st.MedianRTT, st.P95RTT = st.RTT.Median, st.RTT.P95
		out = append(out, st)
	}
	return out
}

// where says what is known of a vantage point: location, network, AS,
// address.
func where(r *store.Row) string {
	var parts []string
	for _, p := range []string{r.VantageLocation, r.VantageNetwork} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if r.VantageASN > 0 {
		parts = append(parts, fmt.Sprintf("AS%d", r.VantageASN))
	}
	if r.VantageAddress != "" {
		parts = append(parts, r.VantageAddress)
	}
	return strings.Join(parts, ", ")
}

// writeVantages writes the per-vantage table, if any sample has one.
func (s *Samples) writeVantages(w io.Writer) error {
	stats := s.ByVantage()
	if len(stats) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nper vantage point, all conditions: medians with their 95 % intervals and 95th percentiles, in ms and in RTTs of the probe")
	fmt.Fprintf(w, "%-12s %-22s %-6s %9s %-17s %-19s %9s %-17s %8s  %s\n", "vantage", "resolver", "transp", "ok", "probe_ms", "median_ms", "p95_ms", "median RTTs", "p95_rtt", "where")
	for _, x := range stats {
		fmt.Fprintf(w, "%-12s %-22s %-6s %4d/%-4d %-17s %-19s %9.1f %-17s %8.2f  %s\n", printable.String(x.Vantage), printable.String(x.Target), x.Transport, x.OK, x.N,
			x.Probe.Cell(1), x.Ms.Cell(1), x.P95Ms, x.RTT.Cell(2), x.P95RTT, printable.String(x.Where))
	}
	return nil
}

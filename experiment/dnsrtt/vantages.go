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
	N, OK     int            // samples, answered samples
	Failed    map[string]int // the others, by rcode or status
	ProbeMs   float64        // the median RTT probed to the resolver
	Probe     stats.Summary
	MedianMs  float64
	P95Ms     float64
	Ms        stats.Summary // the total in ms
	MedianRTT float64
	P95RTT    float64
	RTT       stats.Summary // the total in RTTs of the probe
}

// MaxVantagePanels is how many vantage points the per-vantage figure
// draws a panel of (the most measured; the pooled panel holds them all),
// and MaxVantageRows how many rows the per-vantage tables list; every
// row is in the report's JSON (table "vantages") and in doxlab export.
const (
	MaxVantagePanels = 12
	MaxVantageRows   = 240
)

// vantages are the vantage points the samples name, in order.
func (s *Samples) vantages() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range s.Groups {
		if c.Vantage != "" && !seen[c.Vantage] {
			seen[c.Vantage] = true
			out = append(out, c.Vantage)
		}
	}
	slices.SortFunc(out, order.Compare)
	return out
}

// panelVantages are at most MaxVantagePanels vantage points, the most
// measured, in order.
func (s *Samples) panelVantages() []string {
	all := s.vantages()
	if len(all) <= MaxVantagePanels {
		return all
	}
	n := map[string]int{}
	for _, c := range s.Groups {
		n[c.Vantage] += c.N
	}
	slices.SortStableFunc(all, func(a, b string) int { return cmp.Compare(n[b], n[a]) })
	all = all[:MaxVantagePanels]
	slices.SortFunc(all, order.Compare)
	return all
}

// ByVantage summarizes the samples measured from vantage points, per
// vantage point, resolver and transport.
func (s *Samples) ByVantage() []VantageStat {
	type key struct{ v, t, tr string }
	cells := filter(s.Groups, func(c *Group) bool { return c.Vantage != "" && c.Target != OtherResolvers })
	keys, groups := pool(cells, func(c *Group) key { return key{c.Vantage, c.Target, c.Transport} })
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.v, b.v), order.Compare(a.t, b.t), order.Compare(a.tr, b.tr))
	})
	var out []VantageStat
	for _, k := range keys {
		g := groups[k]
		st := VantageStat{Vantage: k.v, Where: g.Where, Target: k.t, Transport: k.tr, N: g.N, OK: g.Answered, Failed: g.Failed}
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
	rows := s.ByVantage()
	if len(rows) == 0 {
		return nil
	}
	left := max(len(rows)-MaxVantageRows, 0)
	rows = rows[:len(rows)-left]
	fmt.Fprintln(w, "\nper vantage point, all conditions: medians with their 95 % intervals and 95th percentiles, in ms and in RTTs of the probe")
	fmt.Fprintf(w, "%-12s %-22s %-6s %9s %-17s %-19s %9s %-17s %8s  %-30s %s\n", "vantage", "resolver", "transp", "answered", "probe_ms", "median_ms", "p95_ms", "median RTTs", "p95_rtt", "where", "failed")
	for _, x := range rows {
		fmt.Fprintf(w, "%-12s %-22s %-6s %4d/%-4d %-17s %-19s %9.1f %-17s %8.2f  %-30s %s\n", printable.String(x.Vantage), printable.String(x.Target), x.Transport, x.OK, x.N,
			x.Probe.Cell(1), x.Ms.Cell(1), x.P95Ms, x.RTT.Cell(2), x.P95RTT, printable.String(x.Where), stats.Counts(x.Failed))
	}
	if left > 0 {
		fmt.Fprintf(w, "%d more rows past the first %d: every one is in the report's JSON (table vantages) and in doxlab export\n", left, MaxVantageRows)
	}
	return nil
}

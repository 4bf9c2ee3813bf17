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
	for _, r := range s.Rows {
		if r.Vantage != "" && !slices.Contains(out, r.Vantage) {
			out = append(out, r.Vantage)
		}
	}
	slices.SortFunc(out, order.Compare)
	return out
}

// ByVantage summarizes the samples measured from vantage points, per
// vantage point, resolver and transport.
func (s *Samples) ByVantage() []VantageStat {
	type key struct{ v, t, tr string }
	rows := slices.DeleteFunc(slices.Clone(s.Rows), func(r store.Row) bool { return r.Vantage == "" })
	keys, groups := order.Group(rows, func(r store.Row) key { return key{r.Vantage, r.Target, r.Transport} })
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.v, b.v), order.Compare(a.t, b.t), order.Compare(a.tr, b.tr))
	})
	var out []VantageStat
	for _, k := range keys {
		g := groups[k]
		st := VantageStat{Vantage: k.v, Where: where(g[0]), Target: k.t, Transport: k.tr, N: len(g)}
		var ms, rtt, probe []float64
		for _, r := range g {
			if r.ProbeRTTMs != nil {
				probe = append(probe, *r.ProbeRTTMs)
			}
			if r.TotalMs == nil || r.TotalRTT == nil {
				continue
			}
			st.OK++
			ms, rtt = append(ms, *r.TotalMs), append(rtt, *r.TotalRTT)
		}
		slices.Sort(ms)
		slices.Sort(rtt)
		slices.Sort(probe)
		st.Probe = stats.Summarize(probe)
		st.ProbeMs = st.Probe.Median
		st.Ms = stats.Summarize(ms)
		st.MedianMs, st.P95Ms = st.Ms.Median, st.Ms.P95
		st.RTT = stats.Summarize(rtt)
		st.MedianRTT, st.P95RTT = st.RTT.Median, st.RTT.P95
		out = append(out, st)
	}
	return out
}

// where says what is known of a vantage point: location, network, AS,
// address.
func where(r store.Row) string {
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

package dnsrtt

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/store"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Samples are DNS samples as stored (by dns-rtt, measure and campaigns),
// gathered into cells.
type Samples struct {
	Groups []*Group
	// Skipped are samples left out for a non-finite duration (NaN or an
	// infinity), which doxlab refuses to store: they were written
	// around it.
	Skipped int
	// Folded are samples whose own cell MaxCells left no room for: they
	// count in every pooled table, figure and finding, and in an
	// OtherResolvers cell, not in a per-resolver row.
	Folded int
	// Canceled are rows of tasks an interrupted run cancelled: no
	// samples, in no n.
	Canceled int
	// OKRcodes are the rcodes taken as answers; other answers failed.
	OKRcodes []string

	answers measure.Answers
	// rescan reads the samples again, row by row: where a comparison of
	// binned values cannot tell, its exact values are read (compare).
	rescan func(fn func(*store.Row)) error

	resolvers *[]ResolverStat // ByResolver, once computed
}

// Load reads the DNS samples of the runs whose IDs start with prefix, of
// any kind: the report draws measure's and campaigns' samples too.
func (c *DNSRTT) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	return LoadSamples(ctx, st, store.Filter{RunPrefix: prefix})
}

// LoadFiltered is Load of what a filter selects: its samples name the
// vantage point that measured them.
func (c *DNSRTT) LoadFiltered(ctx context.Context, st *store.Store, f store.Filter) (experiment.Results, error) {
	return LoadSamples(ctx, st, f)
}

// Count is the number of samples.
func (s *Samples) Count() (int, string) {
	n := 0
	for _, c := range s.Groups {
		n += c.N
	}
	return n, "samples"
}

// Summarize is the medians per profile, transport and condition, in
// RTTs, with what the protocol and the link explain of them.
func (s *Samples) Summarize() []Summary {
	type key struct{ p, t, c string }
	keys, groups := pool(s.Groups, func(c *Group) key { return key{c.Profile, c.Transport, c.Condition} })
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.p, b.p), order.Compare(a.c, b.c), order.Compare(a.t, b.t))
	})
	var out []Summary
	for _, k := range keys {
		g := groups[k]
		sum := Summary{Profile: k.p, Transport: k.t, Condition: k.c, N: g.N, OK: g.Answered, Failed: g.Failed, Expected: Expected(k.t, k.c),
			TotalEmulated: math.NaN(), Serialization: math.NaN()} // no profile, no emulated RTT
		sum.TotalStat, sum.HandshakeStat, sum.ResolveStat = g.RTT.Summary(), g.Handshake.Summary(), g.Resolve.Summary()
		sum.Handshake, sum.Resolve, sum.Total = sum.HandshakeStat.Median, sum.ResolveStat.Median, sum.TotalStat.Median
		if p := g.Link; p != nil && p.RTT() > 0 {
			perRTT := float64(time.Millisecond) / float64(p.RTT())
			sum.TotalEmulatedStat, sum.SerializationStat = g.Ms.Summary().Scale(perRTT), g.Serial.Summary().Scale(perRTT)
			sum.TotalEmulated, sum.Serialization = sum.TotalEmulatedStat.Median, sum.SerializationStat.Median
		}
		out = append(out, sum)
	}
	return out
}

// WriteTable writes the medians per profile, transport and condition, in
// RTTs.
func (s *Samples) WriteTable(w io.Writer) error {
	if s.Skipped > 0 {
		fmt.Fprintf(w, "%d samples left out: they hold a duration that is not a finite number (doxlab writes none)\n", s.Skipped)
	}
	if s.Folded > 0 {
		fmt.Fprintf(w, "%d samples of resolvers past the bound of %d cells count in the pooled tables only (per-resolver rows: doxlab export)\n", s.Folded, MaxCells)
	}
	if s.Canceled > 0 {
		fmt.Fprintf(w, "%d tasks an interrupted run cancelled are no samples, and in no count\n", s.Canceled)
	}
	fmt.Fprintf(w, "answered: an answer with rcode %s, the only samples timed; the others are counted under failed by rcode or status\n", s.answeredRcodes())
	fmt.Fprintln(w, "medians with their 95 % intervals, in RTTs of the probe, and the total in RTTs of the profile; excess and rest are differences of medians")
	fmt.Fprintf(w, "%-10s %-6s %-8s %9s %-19s %-19s %-19s %-19s %8s %7s %-19s %7s  %s\n", "profile", "transp", "cond", "answered", "handshake", "resolve", "total", "total/em", "expected", "excess", "serial", "rest", "failed")
	for _, x := range s.Summarize() {
		fmt.Fprintf(w, "%-10s %-6s %-8s %9s %-19s %-19s %-19s %-19s %8.0f %7s %-19s %7s  %s\n", x.Profile, x.Transport, x.Condition, fmt.Sprintf("%d/%d", x.OK, x.N),
			x.HandshakeStat.Cell(2), x.ResolveStat.Cell(2), x.TotalStat.Cell(2), x.TotalEmulatedStat.Cell(2), x.Expected, signed(x.Total-x.Expected),
			x.SerializationStat.Cell(2), signed(x.TotalEmulated-x.Expected-x.Serialization), stats.Counts(x.Failed))
	}
	fmt.Fprintln(w, "total/em divides by the profile's RTT; on slow uplinks the QUIC probe (a 1200-octet Initial) is itself slowed, and total understates the excess")
	_, err := fmt.Fprintln(w, "serial = the exchange's packets (bytes and packets at the socket, plus IP and UDP/TCP headers) passing the profile's rate limits, in RTTs of the profile, an upper bound since what the connection carries after the answer (ACKs, tickets) counts too; rest = total/em - expected - serial: the hosts' share (crypto, processing, pacing, delayed ACKs)")
	if err != nil {
		return err
	}
	s.writeResolvers(w)
	return s.writeVantages(w)
}

// answeredRcodes are the rcodes taken as answers, as a sentence says them.
func (s *Samples) answeredRcodes() string {
	if len(s.OKRcodes) == 0 {
		return strings.Join(measure.DefaultOKRcodes, " or ")
	}
	return strings.Join(s.OKRcodes, " or ")
}

// Stat is one row of the report's table: a profile × transport ×
// condition in ms and in RTTs.
type Stat struct {
	Profile, Transport, Condition string
	N, OK                         int            // samples, answered samples
	Failed                        map[string]int // the others, by rcode or status
	MedianMs, IQRMs, P95Ms        float64
	Ms                            stats.Summary // the total in ms, with the median's 95 % interval
	MedianRTT, IQRRTT, P95RTT     float64
	RTT                           stats.Summary // the total in RTTs of the probe
	// Serial, Wire and Client are SerialMs, WireMs and ClientMs with
	// their intervals.
	Serial, Wire, Client stats.Summary
	// SerialMs is the median time the exchange's packets take to pass
	// the profile's rate limits (SerializationMs); NaN where the profile
	// is not known.
	SerialMs float64
	// WireMs is the median exchange on the wire (kernel timestamps), and
	// ClientMs the median of total minus wire: the client's own time. NaN
	// where the records have no wire times.
	WireMs, ClientMs float64
}

// signed is v with its sign and two decimals, "–" for NaN.
func signed(v float64) string {
	if math.IsNaN(v) {
		return stats.None
	}
	return fmt.Sprintf("%+.2f", v)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Stats is the report's table: median, IQR and p95 per profile ×
// transport × condition, in ms and in RTTs.
func (s *Samples) Stats() []Stat {
	type key struct{ p, t, c string }
	keys, groups := pool(s.Groups, func(c *Group) key { return key{orNone(c.Profile), c.Transport, c.Condition} })
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.p, b.p), order.Compare(a.c, b.c), order.Compare(a.t, b.t))
	})
	var out []Stat
	for _, k := range keys {
		g := groups[k]
		st := Stat{Profile: k.p, Transport: k.t, Condition: k.c, N: g.N, OK: g.Answered, Failed: g.Failed}
		st.Serial, st.Wire, st.Client = g.Serial.Summary(), g.Wire.Summary(), g.Client.Summary()
		st.SerialMs, st.WireMs, st.ClientMs = st.Serial.Median, st.Wire.Median, st.Client.Median
		st.Ms, st.RTT = g.Ms.Summary(), g.RTT.Summary()
		st.MedianMs, st.IQRMs, st.P95Ms = st.Ms.Median, st.Ms.IQR(), st.Ms.P95
		st.MedianRTT, st.IQRRTT, st.P95RTT = st.RTT.Median, st.RTT.IQR(), st.RTT.P95
		out = append(out, st)
	}
	return out
}

// Metrics are the durations the report draws, each in RTTs.
var Metrics = []struct {
	Name, Title string
	Note        string // what the figure must say of its values
	Get         func(*Group) *stats.Dist
}{
	{"total", "DNS exchange (multiples of the RTT)", "", func(c *Group) *stats.Dist { return c.RTT }},
	{"handshake", "handshake (multiples of the RTT)",
		"the TLS or QUIC handshake: UDP and TCP have none, so theirs is 0 by definition (TCP's connect, one RTT, counts in the total alone)",
		func(c *Group) *stats.Dist { return c.Handshake }},
	{"resolve", "query to answer (multiples of the RTT)", "", func(c *Group) *stats.Dist { return c.Resolve }},
}

// loopbackMetrics are what a report draws of samples measured on
// loopback only: the total in ms.
var loopbackMetrics = []struct {
	Name, Title string
	Note        string
	Get         func(*Group) *stats.Dist
}{
	{"total", "DNS exchange (ms)", "", func(c *Group) *stats.Dist { return c.MsAll }},
}

var conditionDashes = map[string][]vg.Length{"fresh": nil, "pam": {vg.Points(1), vg.Points(2)}, "resumed": {vg.Points(5), vg.Points(3)}, "0rtt": {vg.Points(2), vg.Points(2)}}

// cdfSeries is a line per transport × condition of one metric.
func cdfSeries(cells []*Group, get func(*Group) *stats.Dist) []*figure.Series {
	type key struct{ t, c string }
	keys, groups := pool(cells, func(c *Group) key { return key{c.Transport, c.Condition} })
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(order.Compare(a.t, b.t), order.Compare(a.c, b.c)) })
	var out []*figure.Series
	for _, k := range keys {
		if d := get(groups[k]); d.N() > 0 {
			out = append(out, &figure.Series{Label: figure.Label(k.t) + " " + k.c, Color: figure.Colors[k.t], Glyph: figure.Glyphs[k.t], Dashes: conditionDashes[k.c], Dist: d})
		}
	}
	return out
}

var statsTable = experiment.Table("dns", `{{with .Resolvers}}<h3>Per resolver</h3><table id="resolvers"><tr><th>rank</th><th class="l">resolver</th><th class="l">transport</th><th class="l">condition</th><th>answered</th>
<th>median ms</th><th>95 % CI ms</th><th>median RTT</th><th>probe RTT ms</th><th class="l">against the fastest</th><th class="l">failed</th></tr>
{{range .}}<tr><td>{{.RankText}}</td><td class="l">{{.Target}}</td><td class="l">{{.Transport}}</td><td class="l">{{.Condition}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{f .Ms.Median}}</td><td>{{ci .Ms}}</td><td>{{mci .RTT}}</td><td>{{mci .Probe}}</td><td class="l">{{if gt .Rank 1}}{{delta .VsFastest}}{{else}}{{.VsText}}{{end}}</td><td class="l">{{failed .Failed}}</td></tr>
{{end}}</table>{{with $.ResolversLeft}}<p class="note">{{.}} more rows past the {{$.MaxResolverRows}} fastest of each transport and condition: every one is in <code>doxlab report --json</code> (table <code>resolvers</code>) and in <code>doxlab export</code>.</p>{{end}}{{end}}

{{if .Resolvers}}<h3>Pooled over the resolvers</h3>{{end}}<table id="summary"><tr><th class="l">profile</th><th class="l">transport</th><th class="l">condition</th><th>answered</th>
<th>median ms</th><th>95 % CI ms</th><th>IQR ms</th><th>p95 ms</th><th>median RTT</th><th>IQR RTT</th><th>p95 RTT</th><th>serial ms</th><th>wire ms</th><th>client ms</th><th class="l">failed</th></tr>
{{range .Stats}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Transport}}</td><td class="l">{{.Condition}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{f .MedianMs}}</td><td>{{ci .Ms}}</td><td>{{f .IQRMs}}</td><td>{{f .P95Ms}}</td><td>{{mci .RTT}}</td><td>{{f .IQRRTT}}</td><td>{{f .P95RTT}}</td><td>{{mci .Serial}}</td><td>{{mci .Wire}}</td><td>{{mci .Client}}</td><td class="l">{{failed .Failed}}</td></tr>
{{end}}</table>
{{with .Vantages}}<h3>Per vantage point</h3><table id="vantages"><tr><th class="l">vantage</th><th class="l">where</th><th class="l">resolver</th><th class="l">transport</th><th>answered</th>
<th>probe RTT ms</th><th>median ms</th><th>p95 ms</th><th>median RTT</th><th>p95 RTT</th><th class="l">failed</th></tr>
{{range .}}<tr><td class="l">{{.Vantage}}</td><td class="l">{{.Where}}</td><td class="l">{{.Target}}</td><td class="l">{{.Transport}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{mci .Probe}}</td><td>{{mci .Ms}}</td><td>{{f .P95Ms}}</td><td>{{mci .RTT}}</td><td>{{f .P95RTT}}</td><td class="l">{{failed .Failed}}</td></tr>
{{end}}</table>{{with $.VantagesLeft}}<p class="note">{{.}} more rows past the first {{$.MaxVantageRows}}: every one is in <code>doxlab report --json</code> (table <code>vantages</code>) and in <code>doxlab export</code>.</p>{{end}}{{end}}`)

// Section is the report's DNS part: the table, and the CDF of each
// metric per profile and over all (cross-layer paper Fig. 5-7, PAM 2022
// Fig. 3).
func (s *Samples) Section(dir string) (*experiment.Section, error) {
	set := &figure.Set{Dir: dir, Parallel: true} // six panels of figures: half the time on two cores
	var profiles []string
	for _, c := range s.Groups {
		if p := orNone(c.Profile); !slices.Contains(profiles, p) {
			profiles = append(profiles, p)
		}
	}
	slices.SortFunc(profiles, order.Compare)
	// Loopback's RTT is tens of microseconds, so its exchanges are tens
	// of "RTTs": pooled with emulated links they would stretch every
	// panel's axis. They keep a panel of their own, outside the pool.
	all, of := "all", "over all profiles, then each"
	inAll := func(*Group) bool { return true }
	if slices.Contains(profiles, "none") && len(profiles) > 1 {
		all, of = "all emulated", "over the emulated profiles, then each (loopback, none, apart: its RTT is tens of microseconds)"
		inAll = func(c *Group) bool { return orNone(c.Profile) != "none" }
	}
	// Several resolvers: each apart first, then the pools.
	if err := s.resolverFigure(set); err != nil {
		return nil, err
	}
	metrics, title := Metrics, "DNS exchange in round trips"
	if !slices.ContainsFunc(profiles, func(p string) bool { return p != "none" }) {
		// Loopback only: its RTT is tens of microseconds, so round-trip
		// multiples would say nothing; milliseconds do.
		metrics, title = loopbackMetrics, "DNS exchange"
		of = "per transport and condition, in ms: on loopback a round trip is tens of microseconds, so multiples of it say nothing"
	}
	for _, m := range metrics {
		// Small multiples: all profiles, then each, on one x axis.
		note := of
		if m.Note != "" {
			note += "; " + m.Note
		}
		if err := smallMultiples(set, s.Groups, "profile", func(c *Group) string { return orNone(c.Profile) }, profiles, all, inAll, m.Get, m.Title,
			"cdf-"+m.Name, "CDF of the "+m.Title, note); err != nil {
			return nil, err
		}
	}
	intro := ""
	if s.Skipped > 0 {
		intro = fmt.Sprintf("<b>%d samples left out</b>: they hold a duration that is not a finite number (NaN or an infinity), which doxlab never writes. ", s.Skipped)
	}
	if s.Folded > 0 {
		intro += fmt.Sprintf("<b>%d samples of resolvers past the report's bound of %d cells</b> count in every pooled table, figure and finding, but have no per-resolver or per-vantage row (doxlab export has every sample; <code>doxlab report --max-cells</code> raises the bound, about 5 KB a cell). ", s.Folded, MaxCells)
	}
	if s.Canceled > 0 {
		intro += fmt.Sprintf("%d tasks an interrupted run cancelled are no samples and in no count. ", s.Canceled)
	}
	intro += fmt.Sprintf("<i>Answered</i> samples are those with an answer of rcode %s: only they are timed; the others are counted under <i>failed</i> by rcode (REFUSED, SERVFAIL, ...) or by what went wrong (timeout, ...). ", s.answeredRcodes())
	intro += "Every duration is divided by the RTT probed on the same port and protocol just after the exchange. Summary of the DNS exchange (total) per access profile, transport and condition. <i>serial</i> is how long the exchange's packets (with IP and UDP/TCP headers) take to pass the profile's rate limits: the link's share of the time above the protocol's round-trip count, at most. <i>wire</i> is the exchange as the client's kernel saw it cross the socket (first packet out to answer in), <i>client</i> the median of the total minus it: the client's own time."
	if vantages := s.panelVantages(); len(vantages) > 0 {
		intro += " Campaigns measured from several vantage points: the second table and the last figure give each vantage point apart."
		m := Metrics[0]
		cells := filter(s.Groups, func(c *Group) bool { return c.Vantage != "" })
		of := "over all vantage points, then each"
		if n := len(s.vantages()); n > len(vantages) {
			of = fmt.Sprintf("over all %d vantage points, then the %d most measured", n, len(vantages))
		}
		if err := smallMultiples(set, cells, "vantage", func(c *Group) string { return c.Vantage }, vantages, "all", func(*Group) bool { return true }, m.Get, m.Title,
			"cdf-"+m.Name+"-by-vantage", "CDF of the "+m.Title+" per vantage point", of); err != nil {
			return nil, err
		}
	}
	resolvers, left := s.shownResolvers()
	vantageRows := s.ByVantage()
	vantagesLeft := max(len(vantageRows)-MaxVantageRows, 0)
	vantageRows = vantageRows[:len(vantageRows)-vantagesLeft]
	if len(resolvers) > 0 {
		intro = "Several resolvers were measured: the first figure and table give each apart (a colour per resolver; the table ranks each among those measured over the same transport and condition), the others pool them. " + intro
	}
	return experiment.NewSection("dns", title, template.HTML(intro), statsTable,
		map[string]any{"Stats": s.Stats(), "Vantages": vantageRows, "VantagesLeft": vantagesLeft, "MaxVantageRows": MaxVantageRows,
			"Resolvers": resolvers, "ResolversLeft": left, "MaxResolverRows": MaxResolverRows}, set)
}

// smallMultiples draws the CDF of get over the rows inAll keeps (a panel
// called all), then over each group (groupOf) in a panel of its own, a
// line per transport and condition; the panels share the x axis, but for
// a group outside the pool, which keeps its own.
func smallMultiples(set *figure.Set, cells []*Group, groupName string, groupOf func(*Group) string, groups []string, all string, inAll func(*Group) bool,
	get func(*Group) *stats.Dist, xlabel, name, heading, of string) error {
	// An "all" panel only where there is more than one to pool: with one
	// profile it would repeat it.
	names, hasAll := groups, len(groups) > 1
	if hasAll {
		names = append([]string{all}, groups...)
	}
	data := figure.Data{Header: []string{groupName, "series", "value", "cdf"}}
	var panels []*plot.Plot
	var shared []bool // the panel takes the shared x axis
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, g := range names {
		isAll := hasAll && i == 0
		keep := func(c *Group) bool { return groupOf(c) == g }
		if isAll {
			keep = inAll
		}
		pooled := isAll || slices.ContainsFunc(cells, func(c *Group) bool { return groupOf(c) == g && inAll(c) })
		plt, d, err := figure.CDFPanel(cdfSeries(filter(cells, keep), get), g, xlabel, false)
		if err != nil {
			return err
		}
		for _, row := range d.Rows {
			data.Rows = append(data.Rows, append([]string{g}, row...))
		}
		if len(d.Rows) > 0 && pooled {
			lo, hi = min(lo, plt.X.Min), max(hi, plt.X.Max)
		}
		if i > 0 {
			plt.Legend = plot.NewLegend() // one legend, in a panel of its own
		}
		panels, shared = append(panels, plt), append(shared, pooled)
	}
	for i, plt := range panels {
		if lo < hi && shared[i] {
			plt.X.Min, plt.X.Max = lo, hi
		}
	}
	panels = append(panels, figure.LegendPanel(panels[0]))
	grid := figure.Rows(panels, 4)
	return set.AddGrid(grid, name, heading, of, 12*vg.Inch, vg.Length(3.2*float64(len(grid)))*vg.Inch, data)
}

// totals is the fresh-connection totals in RTTs of one transport,
// measured on an emulated link where any were; onLoopback says that
// none were, so the RTTs are loopback's. in says which rows they are.
func (s *Samples) totals(transport string) (out *stats.Dist, onLoopback bool, in func(*store.Row) bool) {
	emulated := slices.ContainsFunc(s.Groups, func(c *Group) bool { return c.Profile != "" && c.Profile != "none" })
	keep := func(tr, cond, profile string) bool {
		return tr == transport && cond == "fresh" && (!emulated || (profile != "" && profile != "none"))
	}
	out = stats.NewDist()
	for _, c := range s.Groups {
		if keep(c.Transport, c.Condition, c.Profile) {
			out.Merge(c.RTT)
		}
	}
	return out, !emulated, func(r *store.Row) bool { return keep(r.Transport, r.Condition, r.Profile) }
}

// Findings checks the cross-layer paper's §IV-B claims (Fig. 5): DoUDP
// takes one round trip, and DoQ's exchange is about one round trip
// shorter than DoH's, on new connections over all profiles.
func (s *Samples) Findings() []experiment.Finding {
	udps, loopback, _ := s.totals("udp")
	doqs, _, inDoQ := s.totals("doq")
	dohs, _, inDoH := s.totals("doh2")
	udp, doq, doh := udps.Summary().Median, doqs.Summary().Median, dohs.Summary().Median
	apart := s.compare(doqs, dohs, inDoQ, inDoH, func(r *store.Row) (float64, bool) {
		if r.TotalRTT == nil {
			return 0, false
		}
		return *r.TotalRTT, true
	})
	return []experiment.Finding{
		{
			Claim:  "DoUDP resolves in one round trip",
			Source: "cross-layer paper §IV-B, Fig. 5",
			Paper:  "1.03 RTT (median, all profiles)",
			Here:   experiment.F2(udp) + " RTT",
			Why:    "holds within 0.95-1.15 RTT",
			Figure: "cdf-total", Verdict: experiment.Within(udp, 0.95, 1.15),
			N: udps.N(), InRTTs: true, OnLoopback: loopback,
		},
		{
			Claim:  "DoQ's DNS exchange is about one round trip shorter than DoH's",
			Source: "cross-layer paper §IV-B, Fig. 5",
			Paper:  "DoQ 2.50, DoH 3.43 RTT: 0.93 apart (medians, new connections)",
			Here:   fmt.Sprintf("DoQ %s, DoH/2 %s RTT: %s apart", experiment.F2(doq), experiment.F2(doh), experiment.F2(doh-doq)),
			Why:    "holds when DoH's median exceeds DoQ's by 0.6-1.4 RTT and Mann-Whitney tells them apart",
			Figure: "cdf-total", Verdict: experiment.Within(doh-doq, 0.6, 1.4),
			N: min(doqs.N(), dohs.N()), InRTTs: true, OnLoopback: loopback, Test: &apart,
		},
	}
}

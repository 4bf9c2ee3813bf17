package web

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unique"

	"github.com/miekg/dns"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// Wild are the page loads of campaigns (the IMC 2022 study's method):
// real pages through real resolvers from vantage points, as the
// analysis reads them.
type Wild []wildPoint

type wildLoad struct {
	*campaign.PageLoad
	WildLoad
	pageDNS *pageDNS // what its page's HTTPS lookups said, once read
	up      *upstreamFacts
}

// analysedWild is decodeWild for analysis.
func analysedWild(id string, raw []byte) (*wildLoad, error) { return decodeWild(id, raw, true) }

// decodeWild decodes a stored campaign page load of run id, the loader's
// record included; for analysis, without what it never reads (the
// navigations whole, the stub's records of the page's host; see
// pages.DecodeForAnalysis), and with the warm-up's stub records read
// for the page's HTTPS record alone.
func decodeWild(id string, raw []byte, analysis bool) (*wildLoad, error) {
	x := &wildLoad{PageLoad: new(campaign.PageLoad)}
	if analysis { // in one pass: the loader's record decoded where it lies
		wa := &wildAnalysed{WildLoad: &x.WildLoad}
		in := wildAnalysedLoad{x.PageLoad, wa}
		if err := pages.UnmarshalAnalysed(raw, &in); err != nil {
			return nil, fmt.Errorf("store: campaign page load in run %s: %w", id, err)
		}
		x.pageDNS, x.up = x.pageRecords(), x.upstream()
		x.WarmStub, x.Stub = nil, nil
		if x.Sample != nil {
			x.Sample.Lighten(wa.H3Conn, wa.ConnsPerOrigin)
		}
		x.lighten()
		return x, nil
	}
	if err := json.Unmarshal(raw, x.PageLoad); err != nil {
		return nil, fmt.Errorf("store: campaign page load in run %s: %w", id, err)
	}
	if err := json.Unmarshal(x.Load, &x.WildLoad); err != nil {
		return nil, fmt.Errorf("store: campaign page load %s in run %s: %w", x.Key(), id, err)
	}
	return x, nil
}

// wildAnalysedLoad is a campaign's page load as analysis decodes it:
// the loader's record decoded where it lies.
type wildAnalysedLoad struct {
	*campaign.PageLoad
	Load *wildAnalysed `json:"load"`
}

// wildAnalysed is a WildLoad whose fields of the same JSON names shadow
// the records analysis skips, or decode in their place what it reads of
// them (pages.Sample.Lighten).
type wildAnalysed struct {
	*WildLoad
	DNS            pages.Skipped  `json:"dns"`
	Load           pages.Skipped  `json:"load"`
	WarmUp         pages.Skipped  `json:"warm_up"`
	Graph          pages.Skipped  `json:"graph"`
	Replay         pages.Skipped  `json:"replay"`
	ServerQueries  pages.Skipped  `json:"server_queries"`
	UserAgent      pages.Skipped  `json:"user_agent"`
	Refused        pages.Skipped  `json:"refused_connections"`
	WarmRefused    pages.Skipped  `json:"warm_up_refused_connections"`
	Confinement    pages.Skipped  `json:"confinement"`
	H3Conn         *pages.H3Token `json:"h3_conn"`
	ConnsPerOrigin pages.ConnSum  `json:"conns_per_origin"`
}

// lighten keeps one copy of each value a campaign's loads repeat: the
// task's, the status, the resolver's note, the vantage point's labels.
func (x *wildLoad) lighten() {
	p := x.PageLoad
	for _, f := range []*string{&p.URL, &p.Target, &p.Transport, &p.Condition, &p.Page, &p.Status, &p.Resolver} {
		*f = unique.Make(*f).Value()
	}
	if v := p.Vantage; v != nil {
		for _, f := range []*string{&v.Name, &v.Address, &v.Network, &v.Location} {
			*f = unique.Make(*f).Value()
		}
	}
}

func (x *wildLoad) vantage() string {
	if x.Vantage == nil {
		return "here"
	}
	return x.Vantage.Name
}

// resolver is the target as the resolver's host: a resolver measured
// over several protocols by URL targets is one resolver, and an ODoH
// URL's is its target's, not its proxy's (transport.Endpoint.Resolver).
func (x *wildLoad) resolver() string {
	if ep, err := transport.ParseURL(x.Target); err == nil {
		return ep.Resolver()
	}
	return strings.Trim(x.Target, "[]")
}

// regionNote is a resolver's region as its targets file's note gives
// it: "10.0.0.53 # region=EU".
var regionNote = regexp.MustCompile(`(?:^|[\s,;])region=([^\s,;]+)`)

// region is the resolver's region from the note its targets file kept
// with it, "" if none.
func (x *wildLoad) region() string {
	if m := regionNote.FindStringSubmatch(x.PageLoad.Resolver); m != nil {
		return m[1]
	}
	return ""
}

// WildOverview is what the study's overview table says per protocol:
// loads, and what the stub's upstream exchanges of the measured
// navigations did.
type WildOverview struct {
	Transport  string
	Hides      string // its rung on the privacy ladder (protocol.Protocol.Hides)
	Loads, OK  int
	Exchanges  int     // upstream exchanges of the measured navigations
	Resumed    float64 // shares of those exchanges
	ZeroRTT    float64
	Retry      float64
	Token      float64
	Versions   string // QUIC versions, with their shares
	ALPNs      string // ALPNs (DoQ's version), with their shares
	FailReason string // the commonest failure, with its count
}

// Overview is the overview per protocol, in the table's order.
func (w Wild) Overview() []WildOverview {
	by := map[string]*WildOverview{}
	versions, alpns, fails := map[string]map[string]int{}, map[string]map[string]int{}, map[string]map[string]int{}
	for _, x := range w {
		o := by[x.Transport]
		if o == nil {
			o = &WildOverview{Transport: x.Transport}
			if p, ok := protocol.Lookup(x.Transport); ok {
				o.Hides = p.Hides()
			}
			by[x.Transport] = o
			versions[x.Transport], alpns[x.Transport], fails[x.Transport] = map[string]int{}, map[string]int{}, map[string]int{}
		}
		o.Loads++
		if x.Status != "ok" {
			fails[x.Transport][x.Status]++
			continue
		}
		o.OK++
		o.Exchanges += int(x.Exchanges)
		o.Resumed += float64(x.Resumed)
		o.ZeroRTT += float64(x.ZeroRTT)
		o.Retry += float64(x.Retry)
		o.Token += float64(x.Token)
		for _, v := range x.Versions {
			versions[x.Transport][v.Name] += int(v.N)
		}
		for _, a := range x.ALPNs {
			alpns[x.Transport][a.Name] += int(a.N)
		}
	}
	var out []WildOverview
	for _, tr := range slices.SortedFunc(maps.Keys(by), order.Compare) {
		o := by[tr]
		if n := float64(o.Exchanges); n > 0 {
			o.Resumed, o.ZeroRTT, o.Retry, o.Token = o.Resumed/n, o.ZeroRTT/n, o.Retry/n, o.Token/n
		}
		o.Versions, o.ALPNs = shares(versions[tr]), shares(alpns[tr])
		if len(fails[tr]) > 0 {
			top := slices.SortedFunc(maps.Keys(fails[tr]), func(a, b string) int { return cmp.Or(fails[tr][b]-fails[tr][a], strings.Compare(a, b)) })[0]
			o.FailReason = fmt.Sprintf("%s (%d)", top, fails[tr][top])
		}
		out = append(out, *o)
	}
	return out
}

// PageRecords is what the pages a campaign loaded publish in DNS for
// their own host, read from the HTTPS lookups the browser made through
// the stub while loading them (warm-up and measured): of the pages whose
// HTTPS lookup an upstream exchange answered, those with an HTTPS record,
// and those whose record carries an ECH config (ech=), the step ECH
// needs (RFC 9848).
type PageRecords struct {
	Asked      int         // pages whose HTTPS lookup was answered
	HTTPS, ECH stats.Share // of Asked
}

// pageDNS is what one load's HTTPS lookups of its page's host said.
type pageDNS struct {
	host              string
	asked, https, ech bool
}

// pageRecords reads it from the load's stub records, warm-up and
// measured; nil for a page without a host.
func (x *wildLoad) pageRecords() *pageDNS {
	if x.pageDNS != nil {
		return x.pageDNS
	}
	u, err := url.Parse(x.Page)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	p := &pageDNS{host: dns.Fqdn(strings.ToLower(u.Hostname()))}
	for _, r := range slices.Concat(x.WarmStub, x.Stub) {
		if r.QType != "HTTPS" || !strings.EqualFold(r.QName, p.host) || r.Upstream == nil || r.Upstream.Status != transport.StatusOK {
			continue
		}
		p.asked = true
		for _, a := range r.Upstream.Answers {
			if f := strings.Fields(a); len(f) > 4 && f[3] == "HTTPS" {
				p.https = true
				p.ech = p.ech || strings.Contains(a, " ech=")
			}
		}
	}
	return p
}

// PageRecords counts each page once, over every load of it.
func (w Wild) PageRecords() PageRecords {
	by := map[string]*pageDNS{}
	for _, x := range w {
		if x.PageHost == "" {
			continue
		}
		p := &pageDNS{host: x.PageHost, asked: x.PageAsked, https: x.PageHTTPS, ech: x.PageECH}
		s := by[p.host]
		if s == nil {
			s = &pageDNS{host: p.host}
			by[p.host] = s
		}
		s.asked, s.https, s.ech = s.asked || p.asked, s.https || p.https, s.ech || p.ech
	}
	var asked, https, ech int
	for _, s := range by {
		if s.asked {
			asked++
			https += int(b2f(s.https))
			ech += int(b2f(s.ech))
		}
	}
	return PageRecords{Asked: asked, HTTPS: stats.NewShare(https, asked), ECH: stats.NewShare(ech, asked)}
}

// String says it in a line.
func (p PageRecords) String() string {
	if p.Asked == 0 {
		return "no page's HTTPS lookup was answered"
	}
	pages := "pages"
	if p.Asked == 1 {
		pages = "page"
	}
	return fmt.Sprintf("of %d %s whose HTTPS lookup was answered, %d have an HTTPS record, %s, and %d an ECH config in it, %s",
		p.Asked, pages, p.HTTPS.K, p.HTTPS.Percent(), p.ECH.K, p.ECH.Percent())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// shares prints counts as shares, largest first: "1 100 %".
func shares(m map[string]int) string {
	total := 0
	for _, n := range m {
		total += n
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %s", k, figure.Share(float64(m[k])/float64(total))))
	}
	return strings.Join(out, ", ")
}

// Relative is a protocol's FCP and PLT relative to DoUDP's in one scope:
// over pairs of loads alike but for the protocol (vantage point,
// resolver, page, round, repetition), the change in percent; only where
// the page loaded over every protocol measured.
type Relative struct {
	Scope, Group string // "all", or "page", "vantage", "resolver" and its value
	Transport    string
	FCP, PLT     []float64 // sorted, percent
	FCPq, PLTq   [3]stats.QuantileEstimate
}

// relQuantiles are the quantiles the study's claims are about, and the
// median.
var relQuantiles = [3]float64{0.4, 0.5, 0.8}

// Relatives are the protocols' changes over DoUDP, over everything, then
// per page, vantage point and resolver.
func (w Wild) Relatives() []Relative {
	type pair struct {
		vantage, resolver, page string
		round, rep              int32
	}
	// Only sets of loads where every protocol measured loaded the page
	// are compared, as the study compared resolvers that speak all
	// three: a resolver without DoQ does not weigh on DoH alone.
	transports := map[string]bool{}
	ok := map[pair]int{}
	base := map[pair]*wildPoint{}
	for i := range w {
		x := &w[i]
		transports[x.Transport] = true
		if x.Status != "ok" {
			continue
		}
		k := pair{x.Vantage, x.Resolver, x.Page, x.Round, x.Rep}
		ok[k]++
		if x.Transport == "udp" {
			base[k] = x
		}
	}
	type key struct{ scope, group, transport string }
	cells := map[key]*Relative{}
	var keys []key
	for _, x := range w {
		if x.Status != "ok" || x.Transport == "udp" {
			continue
		}
		k := pair{x.Vantage, x.Resolver, x.Page, x.Round, x.Rep}
		b := base[k]
		// The loader's own sample's timings (a campaign load repeats them
		// at its top only since 0.1.0: older loads have them there alone).
		if b == nil || !x.Timed || !b.Timed || b.FCP <= 0 || b.PLT <= 0 || ok[k] < len(transports) {
			continue
		}
		scopes := []key{{"all", "", x.Transport}, {"page", x.Page, x.Transport}, {"vantage", x.Vantage, x.Transport}, {"resolver", x.Resolver, x.Transport}}
		if r := x.Region; r != "" {
			scopes = append(scopes, key{"region", r, x.Transport})
		}
		for _, k := range scopes {
			c := cells[k]
			if c == nil {
				c = &Relative{Scope: k.scope, Group: k.group, Transport: k.transport}
				cells[k] = c
				keys = append(keys, k)
			}
			c.FCP = append(c.FCP, 100*(x.FCP/b.FCP-1))
			c.PLT = append(c.PLT, 100*(x.PLT/b.PLT-1))
		}
	}
	rank := map[string]int{"all": 0, "page": 1, "vantage": 2, "region": 3, "resolver": 4}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(rank[a.scope]-rank[b.scope], strings.Compare(a.group, b.group), order.Compare(a.transport, b.transport))
	})
	var out []Relative
	for _, k := range keys {
		c := cells[k]
		c.FCP, c.PLT = stats.Sorted(c.FCP), stats.Sorted(c.PLT)
		for i, q := range relQuantiles {
			c.FCPq[i], c.PLTq[i] = stats.EstimateQuantile(c.FCP, q), stats.EstimateQuantile(c.PLT, q)
		}
		out = append(out, *c)
	}
	return out
}

// Absolute is a protocol's FCP and PLT in ms over the loads that loaded,
// over everything or for one page.
type Absolute struct {
	Scope, Group string // "all", or "page" and the page
	Transport    string
	FCP, PLT     stats.Summary
}

// Absolutes are the protocols' FCP and PLT medians in ms, with their 95 %
// intervals, over every load that loaded, then per page: what the
// ratios to DoUDP are ratios of.
func (w Wild) Absolutes() []Absolute {
	type key struct{ scope, group, transport string }
	fcp, plt := map[key][]float64{}, map[key][]float64{}
	var keys []key
	for _, x := range w {
		if x.Status != "ok" || !x.Timed || x.FCP <= 0 || x.PLT <= 0 {
			continue
		}
		for _, k := range []key{{"all", "", x.Transport}, {"page", x.Page, x.Transport}} {
			if _, ok := fcp[k]; !ok {
				keys = append(keys, k)
			}
			fcp[k], plt[k] = append(fcp[k], x.FCP), append(plt[k], x.PLT)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.scope, b.scope), strings.Compare(a.group, b.group), order.Compare(a.transport, b.transport))
	})
	out := make([]Absolute, 0, len(keys))
	for _, k := range keys {
		out = append(out, Absolute{Scope: k.scope, Group: k.group, Transport: k.transport, FCP: stats.Summarize(fcp[k]), PLT: stats.Summarize(plt[k])})
	}
	return out
}

// Cells are the relative changes as numbers (doxlab report --json): per
// scope, group and protocol, FCP and PLT over DoUDP in percent, their
// median with its interval and quartiles; the p40 and p80 the study's
// claims are about are the findings'.
func (w Wild) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, r := range w.Relatives() {
		keys := map[string]string{"scope": r.Scope, "group": r.Group, "transport": r.Transport}
		out = append(out,
			experiment.NewCell("wild", keys, "fcp_rel_pct", len(r.FCP), stats.Summarize(r.FCP)),
			experiment.NewCell("wild", keys, "plt_rel_pct", len(r.PLT), stats.Summarize(r.PLT)))
	}
	for _, a := range w.Absolutes() {
		keys := map[string]string{"scope": a.Scope, "group": a.Group, "transport": a.Transport}
		out = append(out, experiment.NewCell("wild-absolute", keys, "fcp_ms", a.FCP.N, a.FCP), experiment.NewCell("wild-absolute", keys, "plt_ms", a.PLT.N, a.PLT))
	}
	return out
}

// Count is the number of campaign page loads.
func (w Wild) Count() (int, string) { return len(w), "campaign page loads" }

// WriteTable writes the overview and the relative changes.
func (w Wild) WriteTable(out io.Writer) error {
	fmt.Fprintln(out, "page loads in the wild (campaigns): per protocol, the loads and what the stub's upstream exchanges of the measured navigations did")
	fmt.Fprintf(out, "%-6s %-52s %7s %9s %8s %7s %7s %7s  %-22s %s\n", "dns", "hides", "ok", "exchanges", "resumed", "0-RTT", "Retry", "token", "QUIC versions", "ALPNs")
	for _, o := range w.Overview() {
		fmt.Fprintf(out, "%-6s %-52s %3d/%-3d %9d %8s %7s %7s %7s  %-22s %s\n", o.Transport, o.Hides, o.OK, o.Loads, o.Exchanges, figure.Share(o.Resumed), figure.Share(o.ZeroRTT), figure.Share(o.Retry), figure.Share(o.Token), o.Versions, o.ALPNs)
	}
	fmt.Fprintf(out, "\npages' own DNS: %s\n", w.PageRecords())
	fmt.Fprintln(out, "\nFCP and PLT in ms of the loads that loaded: medians with their 95 % intervals")
	fmt.Fprintf(out, "%-9s %-24s %-6s %5s  %-26s %s\n", "scope", "group", "dns", "loads", "FCP ms", "PLT ms")
	for _, a := range w.Absolutes() {
		fmt.Fprintf(out, "%-9s %-24s %-6s %5d  %-26s %s\n", a.Scope, a.Group, a.Transport, a.FCP.N, a.FCP.Cell(0), a.PLT.Cell(0))
	}
	fmt.Fprintln(out, "\nFCP and PLT relative to DoUDP (pairs alike but for the protocol), in %: p40, median and p80, each with its 95 % interval")
	fmt.Fprintf(out, "%-9s %-24s %-6s %5s  %-26s %-26s %-26s  %-26s %-26s %s\n", "scope", "group", "dns", "pairs", "FCP p40", "FCP p50", "FCP p80", "PLT p40", "PLT p50", "PLT p80")
	for _, r := range w.Relatives() {
		fmt.Fprintf(out, "%-9s %-24s %-6s %5d  %-26s %-26s %-26s  %-26s %-26s %s\n", r.Scope, r.Group, r.Transport, len(r.FCP),
			qcell(r.FCPq[0]), qcell(r.FCPq[1]), qcell(r.FCPq[2]), qcell(r.PLTq[0]), qcell(r.PLTq[1]), qcell(r.PLTq[2]))
	}
	return nil
}

var wildTable = experiment.Table("wild", `<table id="wild-overview"><tr><th class="l">DNS</th><th class="l">hides (its rung)</th><th>loads ok</th><th>upstream exchanges</th><th>resumed</th><th>0-RTT</th><th>Retry</th><th>token</th><th class="l">QUIC versions</th><th class="l">ALPNs</th><th class="l">commonest failure</th></tr>
{{range .Overview}}<tr><td class="l">{{.Transport}}</td><td class="l">{{.Hides}}</td><td>{{.OK}}/{{.Loads}}</td><td>{{.Exchanges}}</td><td>{{share .Resumed}}</td><td>{{share .ZeroRTT}}</td><td>{{share .Retry}}</td><td>{{share .Token}}</td><td class="l">{{.Versions}}</td><td class="l">{{.ALPNs}}</td><td class="l">{{.FailReason}}</td></tr>
{{end}}</table>
<p id="wild-records">The pages' own DNS, from the HTTPS lookups the browser made while loading them: {{.Records}}. An ECH config there is what lets a browser hide the page's name in its ClientHello (RFC 9848); Chromium uses ECH only with its own secure DNS (docs/privacy.md), so these loads, through the stub, send the name in clear: the rung each protocol stands on is what its lookups hide (the table's second column; docs/privacy.md's ladder).</p>
<p>FCP and PLT in ms of the loads that loaded, per protocol, over everything and per page: medians with their 95 % intervals, what the ratios below are ratios of.</p>
<table id="wild-absolute"><tr><th class="l">scope</th><th class="l">group</th><th class="l">DNS</th><th>loads</th><th>FCP ms</th><th>95 % CI</th><th>PLT ms</th><th>95 % CI</th></tr>
{{range .Absolutes}}<tr><td class="l">{{.Scope}}</td><td class="l">{{.Group}}</td><td class="l">{{.Transport}}</td><td>{{.FCP.N}}</td><td>{{ms .FCP.Median}}</td><td>{{ci1 .FCP}}</td><td>{{ms .PLT.Median}}</td><td>{{ci1 .PLT}}</td></tr>
{{end}}</table>
<p>FCP and PLT relative to DoUDP, in %, over pairs of loads alike but for the protocol (vantage point, resolver, page, round, repetition), where the page loaded over every protocol measured (as the study kept the resolvers that speak all three): the 40th percentile, the median and the 80th, each with its distribution-free 95 % interval (order statistics; "±∞" where too few pairs bound it).</p>
<table id="wild-relative"><tr><th class="l">scope</th><th class="l">group</th><th class="l">DNS</th><th>pairs</th><th>FCP p40</th><th>FCP p50</th><th>FCP p80</th><th>PLT p40</th><th>PLT p50</th><th>PLT p80</th></tr>
{{range .Relatives}}<tr><td class="l">{{.Scope}}</td><td class="l">{{.Group}}</td><td class="l">{{.Transport}}</td><td>{{len .FCP}}</td>{{range .FCPq}}<td>{{.SignedCell 0}}</td>{{end}}{{range .PLTq}}<td>{{.SignedCell 0}}</td>{{end}}</tr>
{{end}}</table>`)

func qcell(e stats.QuantileEstimate) string { return e.SignedCell(1) }

// Section is the report's part for the campaigns' page loads: the
// overview, the relative changes, and their CDFs (the IMC 2022 slides'
// figures): over everything, and per page.
func (w Wild) Section(dir string) (*experiment.Section, error) {
	set := &figure.Set{Dir: dir, Parallel: true} // each grid its own plots
	rels := w.Relatives()
	if err := wildCDFs(rels, set); err != nil {
		return nil, err
	}
	return experiment.NewSection("wild", "Page loads in the wild",
		"Page loads measured by campaigns (docs/campaigns.md): Chromium loads each page twice, its DNS through doxlab's stub to the resolver over the protocol; the first navigation warms the resolver's cache and gives the stub its ticket, token and QUIC version, the second, with the browser's caches cleared, is measured. The overview counts the stub's upstream exchanges during the measured navigations; the study reports the same shares (resumption, 0-RTT, QUIC and DoQ versions).",
		wildTable, map[string]any{"Overview": w.Overview(), "Records": w.PageRecords().String(), "Absolutes": w.Absolutes(), "Relatives": rels}, set)
}

// wildCDFs draws the CDFs of FCP and PLT relative to DoUDP: a panel each
// over everything, then PLT per page, vantage point and resolver region.
func wildCDFs(rels []Relative, set *figure.Set) error {
	series := func(scope, group string, fcp bool) []*figure.Series {
		var ss []*figure.Series
		for _, r := range rels {
			if r.Scope != scope || r.Group != group {
				continue
			}
			v := r.PLT
			if fcp {
				v = r.FCP
			}
			ss = append(ss, &figure.Series{Label: r.Transport, Color: figure.Colors[r.Transport], Glyph: figure.Glyphs[r.Transport], Values: slices.Clone(v), Band: true})
		}
		return ss
	}
	if len(series("all", "", true)) == 0 {
		return nil
	}
	all := []cdfPanel{
		{"FCP", "FCP, all pages", "FCP relative to DoUDP (%)", series("all", "", true)},
		{"PLT", "PLT, all pages", "PLT relative to DoUDP (%)", series("all", "", false)},
	}
	if err := cdfGrid(set, "wild-relative", "CDF of FCP and PLT relative to DoUDP", "over every vantage point, resolver and page, with 95 % bands (DKW)", "metric", all); err != nil {
		return err
	}
	for _, scope := range []struct{ name, title string }{{"page", "page"}, {"vantage", "vantage point"}, {"region", "resolver region"}} {
		var panels []cdfPanel
		for _, r := range rels {
			if r.Scope == scope.name && !slices.ContainsFunc(panels, func(p cdfPanel) bool { return p.key == r.Group }) {
				panels = append(panels, cdfPanel{r.Group, r.Group, "PLT relative to DoUDP (%)", series(scope.name, r.Group, false)})
			}
		}
		if len(panels) < 2 {
			continue
		}
		if err := cdfGrid(set, "wild-relative-by-"+scope.name, "CDF of PLT relative to DoUDP per "+scope.title, "a panel per "+scope.title+", with 95 % bands (DKW)", scope.name, panels); err != nil {
			return err
		}
	}
	return nil
}

// cdfPanel is one panel of a grid of CDFs: its key in the data, title,
// x label and lines.
type cdfPanel struct {
	key, title, xlabel string
	series             []*figure.Series
}

// cdfGrid draws panels of signed CDFs, three a row, the legend once in a
// panel of its own, their data keyed by column.
func cdfGrid(set *figure.Set, name, heading, of, column string, panels []cdfPanel) error {
	data := figure.Data{Header: []string{column, "series", "value", "cdf"}}
	var plots []*plot.Plot
	for _, pn := range panels {
		p, d, err := figure.CDFPanel(pn.series, pn.title, pn.xlabel, true)
		if err != nil {
			return err
		}
		for _, row := range d.Rows {
			data.Rows = append(data.Rows, append([]string{pn.key}, row...))
		}
		plots = append(plots, p)
	}
	// The protocols are the same in each panel: one legend, on its own.
	legend := figure.LegendPanel(plots[0])
	for _, p := range plots[1:] {
		p.Legend = plot.NewLegend()
	}
	grid := figure.Rows(append(plots, legend), 3)
	return set.AddGrid(grid, name, heading, of, 12*vg.Inch, vg.Length(3.3*float64(len(grid)))*vg.Inch, data)
}

// Findings checks the IMC 2022 study's headline: DoQ inflates FCP over
// DoUDP less than DoH does, at the 40th and the 80th percentile.
func (w Wild) Findings() []experiment.Finding {
	var doq, doh *Relative
	rels := w.Relatives()
	for i := range rels {
		r := &rels[i]
		if r.Scope != "all" {
			continue
		}
		switch r.Transport {
		case "doq":
			doq = r
		case "doh2":
			doh = r
		}
	}
	var out []experiment.Finding
	for _, q := range []struct {
		at    int // index in relQuantiles
		name  string
		paper string
	}{{0, "p40", "DoQ ≤ +10 %, DoH +20 %"}, {2, "p80", "DoQ ≤ +20 %, DoH +40 %"}} {
		f := experiment.Finding{Claim: "DoQ inflates FCP over DoUDP less than DoH does, at " + q.name, Source: "IMC 2022 DoQ study (slides: FCP over all pages)",
			Paper: q.paper, Figure: "wild-relative"}
		if doq == nil || doh == nil {
			f.Verdict, f.Why = experiment.NoData, "needs campaign page loads over DoUDP, DoH and DoQ"
			out = append(out, f)
			continue
		}
		a, b := doq.FCPq[q.at], doh.FCPq[q.at]
		f.Here = fmt.Sprintf("DoQ %s %%, DoH %s %% (%d and %d pairs)", qcell(a), qcell(b), a.N, b.N)
		f.N = min(a.N, b.N)
		cmp := stats.Compare(doh.FCP, doq.FCP)
		f.Test = &cmp
		f.Verdict = experiment.Differs
		if a.Value < b.Value {
			f.Verdict = experiment.Holds
		}
		f.Why = fmt.Sprintf("DoQ's %s against DoH's; Mann-Whitney over the pairs' changes, p=%s", q.name, stats.F(cmp.P, 3))
		if a.Bounded() && b.Bounded() && a.Hi >= b.Lo && a.Lo <= b.Hi {
			f.Why += "; their intervals overlap"
		}
		out = append(out, f)
	}
	return out
}

// WildRow is one page load of a campaign, flattened for export; the whole
// record (timings, every stub record) stays in the store.
type WildRow struct {
	RunID           string    `parquet:"run_id"`
	StartedAt       time.Time `parquet:"started_at,timestamp(microsecond:utc)"`
	Vantage         string    `parquet:"vantage"`
	VantageLocation string    `parquet:"vantage_location"`
	Resolver        string    `parquet:"resolver"`
	URL             string    `parquet:"url"`
	Transport       string    `parquet:"transport"`
	Page            string    `parquet:"page"`
	Round           int64     `parquet:"round"`
	Rep             int64     `parquet:"rep"`
	Status          string    `parquet:"status"`
	Error           string    `parquet:"error"`
	Protocol        string    `parquet:"protocol"` // the document's
	FCPMs           *float64  `parquet:"fcp_ms,optional"`
	PLTMs           *float64  `parquet:"plt_ms,optional"`
	TTFBMs          *float64  `parquet:"ttfb_ms,optional"`
	Lookups         int64     `parquet:"lookups"`
	// The stub's upstream exchanges of the measured navigation, and how
	// many of them resumed, sent 0-RTT, met a Retry, presented a token.
	Exchanges   int64  `parquet:"upstream_exchanges"`
	Resumed     int64  `parquet:"upstream_resumed"`
	ZeroRTT     int64  `parquet:"upstream_0rtt"`
	Retry       int64  `parquet:"upstream_retry"`
	Token       int64  `parquet:"upstream_token"`
	QUICVersion string `parquet:"quic_version"` // of the first exchange
	ALPN        string `parquet:"alpn"`
	JobAttempt  int64  `parquet:"job_attempt"`
}

func wildRow(id string, x *wildLoad) WildRow {
	r := WildRow{RunID: id, StartedAt: x.Start.UTC(), Vantage: x.vantage(), Resolver: x.resolver(), URL: x.URL, Transport: x.Transport, Page: x.Page,
		Round: int64(x.Round), Rep: int64(x.Rep), Status: x.Status, Error: x.Error}
	if x.Vantage != nil {
		r.VantageLocation = x.Vantage.Location
	}
	if x.Job != nil {
		r.JobAttempt = int64(x.Job.Attempt)
	}
	if s := x.Sample; s != nil {
		r.Lookups = int64(s.Lookups)
		if s.Load != nil {
			r.Protocol = s.Load.Protocol
		}
		if x.Status == "ok" {
			r.FCPMs, r.PLTMs = &s.FCPMs, &s.PLTMs
			if s.Load != nil {
				r.TTFBMs = &s.Load.TTFBMs
			}
		}
	}
	u := x.upstream()
	r.QUICVersion, r.ALPN = u.firstVersion, u.firstALPN
	r.Exchanges, r.Resumed, r.ZeroRTT, r.Retry, r.Token = int64(u.exchanges), int64(u.resumed), int64(u.zeroRTT), int64(u.retry), int64(u.token)
	return r
}

// upstreamFacts is what a load's stub did upstream during the measured
// navigation: its exchanges, how many resumed TLS, sent 0-RTT, met a
// Retry or presented a token, and the QUIC versions and ALPNs of those
// that had one (the first exchange's apart).
type upstreamFacts struct {
	exchanges, resumed, zeroRTT, retry, token int
	versions, alpns                           []string
	firstVersion, firstALPN                   string
}

// upstream reads it from the load's stub records, once.
func (x *wildLoad) upstream() *upstreamFacts {
	if x.up != nil {
		return x.up
	}
	u := &upstreamFacts{}
	for _, rec := range x.Stub {
		up := rec.Upstream
		if up == nil {
			continue
		}
		c := up.Conn
		if u.exchanges == 0 {
			u.firstVersion, u.firstALPN = c.QUICVersion, c.ALPN
		}
		u.exchanges++
		u.resumed += int(b2f(c.TLSResumed))
		u.zeroRTT += int(b2f(c.Used0RTT))
		u.retry += int(b2f(c.Retry))
		u.token += int(b2f(c.TokenUsed))
		if c.QUICVersion != "" {
			u.versions = append(u.versions, c.QUICVersion)
		}
		if c.ALPN != "" {
			u.alpns = append(u.alpns, c.ALPN)
		}
	}
	return u
}

func init() {
	store.RegisterExport("campaign-loads", "a row per page load of a campaign: vantage point, resolver, protocol, page, round, status, FCP, PLT, and what the stub's upstream exchanges did",
		func(ctx context.Context, st *store.Store, keep func(string) bool, emit func(WildRow) error) error {
			return st.Results(ctx, "", campaign.PageLoads, func(id string, raw []byte) error {
				if !keep(id) {
					return nil
				}
				x, err := decodeWild(id, raw, false)
				if err != nil {
					return err
				}
				return emit(wildRow(id, x))
			})
		})
}

// Package report renders stored samples as the papers' figures: CDFs of
// the DNS exchange, handshake and resolve time in multiples of the RTT
// per access profile and overall (cross-layer paper Fig. 5-7, PAM 2022
// Fig. 3), as PNG and SVG, a summary table (median, IQR, p95 in ms and
// RTTs), and one self-contained HTML page that shows them all.
package report

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/doxlab/doxlab/experiment/amplification"
	"github.com/doxlab/doxlab/experiment/dnsrtt"
	"github.com/doxlab/doxlab/experiment/hol"
	xoverhead "github.com/doxlab/doxlab/experiment/overhead"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/verify"
	"github.com/doxlab/doxlab/web"
)

// Metrics are the durations the report draws, each in RTTs.
var Metrics = []struct {
	Name, Title string
	Get         func(store.Row) *float64
}{
	{"total", "DNS exchange (RTTs)", func(r store.Row) *float64 { return r.TotalRTT }},
	{"handshake", "handshake (RTTs)", func(r store.Row) *float64 { return r.HandshakeRTT }},
	{"resolve", "query to answer (RTTs)", func(r store.Row) *float64 { return r.ResolveRTT }},
}

// Stat summarises one cell.
type Stat struct {
	Profile, Transport, Condition string
	N, OK                         int
	MedianMs, IQRMs, P95Ms        float64
	MedianRTT, IQRRTT, P95RTT     float64
	// SerialMs is the median time the exchange's packets take to pass
	// the profile's rate limits (dnsrtt.SerializationMs); NaN where
	// the profile is not known.
	SerialMs float64
}

// Report is what Render wrote.
type Report struct {
	Dir      string
	HTML     string   // the page
	Figures  []string // PNG and SVG files
	Stats    []Stat
	Cells    []web.Cell           // the web experiment's cells
	HOL      []hol.Summary        // the knock-on delay per transport
	Amp      []amplification.Cell // the amplification experiment's cells
	Overhead []xoverhead.Cell     // octets per resolution and layer
	Survey   string               // the survey's tables, as text
}

// Input is what a report draws.
type Input struct {
	Rows []store.Row // DNS samples (measure, campaigns, dns-rtt)
	// SerialMs is, per row of Rows, how long its packets take to pass
	// the rate limits of the link its run recorded
	// (dnsrtt.SerializationMs); NaN where the run had no link.
	SerialMs []float64
	Loads    []*web.Sample           // page loads (web)
	HOL      []*hol.Query            // head-of-line queries (hol)
	Amp      []*amplification.Sample // DoQ handshakes (amplification)
	Overhead []*xoverhead.Conn       // captured connections (overhead)
	Survey   *verify.Survey          // verifications (verify)
}

// Render draws in into dir.
func Render(in Input, dir, title string) (*Report, error) {
	rows, loads := in.Rows, in.Loads
	if len(rows) == 0 && len(loads) == 0 && len(in.HOL) == 0 && len(in.Amp) == 0 && len(in.Overhead) == 0 && (in.Survey == nil || in.Survey.Empty()) {
		return nil, fmt.Errorf("no samples to report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Dir: dir, HTML: filepath.Join(dir, "report.html")}
	profiles := uniq(rows, func(r store.Row) string { return orNone(r.Profile) })
	var figs []figure
	for _, m := range Metrics {
		if len(rows) == 0 {
			break
		}
		for _, p := range append([]string{"all"}, profiles...) {
			var sel []store.Row
			for _, r := range rows {
				if p == "all" || orNone(r.Profile) == p {
					sel = append(sel, r)
				}
			}
			name := fmt.Sprintf("cdf-%s-%s", m.Name, p)
			svg, err := dnsCDF(sel, m.Get, fmt.Sprintf("%s — %s", m.Title, p), filepath.Join(dir, name))
			if err != nil {
				return nil, err
			}
			rep.Figures = append(rep.Figures, filepath.Join(dir, name+".png"), filepath.Join(dir, name+".svg"))
			figs = append(figs, figure{Name: name, Metric: m.Name, Profile: p, SVG: template.HTML(svg)})
		}
	}
	rep.Stats = stats(rows, in.SerialMs)
	var webFigs []figure
	if len(loads) > 0 {
		var err error
		if webFigs, rep.Cells, err = webFigures(loads, dir); err != nil {
			return nil, err
		}
	}
	if len(in.HOL) > 0 {
		hf, err := holFigures(in.HOL, dir)
		if err != nil {
			return nil, err
		}
		rep.HOL = hol.Summarize(in.HOL)
		webFigs = append(webFigs, hf...)
	}
	if len(in.Amp) > 0 {
		rep.Amp = amplification.Summarize(in.Amp)
		f, err := ampFigure(rep.Amp, dir)
		if err != nil {
			return nil, err
		}
		webFigs = append(webFigs, f)
	}
	if in.Survey != nil && !in.Survey.Empty() {
		var b strings.Builder
		in.Survey.Write(&b)
		rep.Survey = b.String()
	}
	if len(in.Overhead) > 0 {
		rep.Overhead = xoverhead.Summarize(in.Overhead)
		of, err := overheadFigures(rep.Overhead, dir)
		if err != nil {
			return nil, err
		}
		webFigs = append(webFigs, of...)
	}
	for _, f := range webFigs {
		rep.Figures = append(rep.Figures, filepath.Join(dir, f.Name+".png"), filepath.Join(dir, f.Name+".svg"))
	}
	if err := writeHTML(rep, figs, webFigs, title); err != nil {
		return nil, err
	}
	return rep, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func uniq(rows []store.Row, f func(store.Row) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rows {
		if k := f(r); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.SortFunc(out, order.Compare)
	return out
}

// series is one line of a CDF.
type series struct {
	label  string
	color  color.Color
	dashes []vg.Length
	values []float64
}

var palette = map[string]color.Color{
	"udp": color.RGBA{0x4d, 0x4d, 0x4d, 0xff}, "tcp": color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, "dot": color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	"doh1": color.RGBA{0xe3, 0x77, 0xc2, 0xff}, "doh2": color.RGBA{0xd6, 0x27, 0x28, 0xff}, "doh3": color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	"doq": color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

var dashes = map[string][]vg.Length{"fresh": nil, "pam": {vg.Points(1), vg.Points(2)}, "resumed": {vg.Points(5), vg.Points(3)}, "0rtt": {vg.Points(2), vg.Points(2)}}

// dnsCDF draws the CDF of one metric, a line per transport × condition.
func dnsCDF(rows []store.Row, get func(store.Row) *float64, title, base string) ([]byte, error) {
	groups := map[[2]string]*series{}
	var keys [][2]string
	for _, r := range rows {
		v := get(r)
		if v == nil || math.IsNaN(*v) {
			continue
		}
		k := [2]string{r.Transport, r.Condition}
		if groups[k] == nil {
			groups[k] = &series{label: r.Transport + " " + r.Condition, color: palette[r.Transport], dashes: dashes[r.Condition]}
			keys = append(keys, k)
		}
		groups[k].values = append(groups[k].values, *v)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		return cmp.Or(order.Compare(a[0], b[0]), order.Compare(a[1], b[1]))
	})
	ss := make([]*series, len(keys))
	for i, k := range keys {
		ss[i] = groups[k]
	}
	return cdf(ss, title, "multiples of the RTT", base, false)
}

// cdf draws one CDF figure to base.png and base.svg and returns the SVG.
// signed lets the x axis go below zero (relative changes).
func cdf(ss []*series, title, xlabel, base string, signed bool) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "CDF"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(8)
	lo, hi := math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range ss {
		if len(s.values) == 0 {
			continue
		}
		n++
		slices.Sort(s.values)
		lo, hi = min(lo, s.values[0]), max(hi, s.values[len(s.values)-1])
		pts := make(plotter.XYs, 0, 2*len(s.values))
		for i, v := range s.values {
			pts = append(pts, plotter.XY{X: v, Y: float64(i) / float64(len(s.values))}, plotter.XY{X: v, Y: float64(i+1) / float64(len(s.values))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = s.color
		if l.Color == nil {
			l.Color = color.Black
		}
		l.Width = vg.Points(1.5)
		l.Dashes = s.dashes
		p.Add(l)
		p.Legend.Add(s.label, l)
	}
	if n == 0 {
		p.Title.Text += " (no data)"
	} else {
		// Room on the right for the legend, so it never covers a line.
		span := max(hi-lo, 0.5)
		p.X.Min, p.X.Max = lo-0.05*span, hi+0.45*span
		if !signed {
			p.X.Min = max(0, p.X.Min)
		}
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return save(p, base, 7*vg.Inch, 4.5*vg.Inch)
}

// save writes a plot as PNG and SVG and returns the SVG for inlining.
func save(p *plot.Plot, base string, w, h vg.Length) ([]byte, error) {
	for _, ext := range []string{".png", ".svg"} {
		if err := p.Save(w, h, base+ext); err != nil {
			return nil, fmt.Errorf("saving %s: %w", base+ext, err)
		}
	}
	svg, err := os.ReadFile(base + ".svg")
	if err != nil {
		return nil, err
	}
	// Inline SVG: drop the XML prolog.
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		svg = svg[i:]
	}
	return svg, nil
}

func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// stats computes the table: per profile × transport × condition.
// serial is Input.SerialMs (nil: unknown for every row).
func stats(rows []store.Row, serial []float64) []Stat {
	type key struct{ p, t, c string }
	groups := map[key][]int{}
	for i, r := range rows {
		k := key{orNone(r.Profile), r.Transport, r.Condition}
		groups[k] = append(groups[k], i)
	}
	var out []Stat
	for k, g := range groups {
		st := Stat{Profile: k.p, Transport: k.t, Condition: k.c, N: len(g), SerialMs: math.NaN()}
		var ms, rtt, ser []float64
		for _, i := range g {
			r := rows[i]
			if r.TotalMs != nil && r.TotalRTT != nil {
				st.OK++
				ms, rtt = append(ms, *r.TotalMs), append(rtt, *r.TotalRTT)
				if i < len(serial) && !math.IsNaN(serial[i]) {
					ser = append(ser, serial[i])
				}
			}
		}
		slices.Sort(ms)
		slices.Sort(rtt)
		slices.Sort(ser)
		if len(ser) > 0 {
			st.SerialMs = quantile(ser, 0.5)
		}
		st.MedianMs, st.IQRMs, st.P95Ms = quantile(ms, 0.5), quantile(ms, 0.75)-quantile(ms, 0.25), quantile(ms, 0.95)
		st.MedianRTT, st.IQRRTT, st.P95RTT = quantile(rtt, 0.5), quantile(rtt, 0.75)-quantile(rtt, 0.25), quantile(rtt, 0.95)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Stat) int {
		return cmp.Or(order.Compare(a.Profile, b.Profile), order.Compare(a.Condition, b.Condition), order.Compare(a.Transport, b.Transport))
	})
	return out
}

type figure struct {
	Name, Metric, Profile string
	SVG                   template.HTML
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"f": func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.2f", v)
	},
	"ms":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pct":   pct,
	"share": func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}h2{margin-top:2em}.fig svg{max-width:100%;height:auto}
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Stats}}<p>Every duration is divided by the RTT probed on the same port and protocol just after the exchange. Summary of the DNS exchange (total) per access profile, transport and condition. <i>serial</i> is how long the exchange's packets (with IP and UDP/TCP headers) take to pass the profile's rate limits: the link's share of the time above the protocol's round-trip count, at most.</p>
<table id="summary"><tr><th class="l">profile</th><th class="l">transport</th><th class="l">condition</th><th>ok/n</th>
<th>median ms</th><th>IQR ms</th><th>p95 ms</th><th>median RTT</th><th>IQR RTT</th><th>p95 RTT</th><th>serial ms</th></tr>
{{range .Stats}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Transport}}</td><td class="l">{{.Condition}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{f .MedianMs}}</td><td>{{f .IQRMs}}</td><td>{{f .P95Ms}}</td><td>{{f .MedianRTT}}</td><td>{{f .IQRRTT}}</td><td>{{f .P95RTT}}</td><td>{{f .SerialMs}}</td></tr>
{{end}}</table>{{end}}
{{range .Figures}}<h2 id="{{.Name}}">{{.Metric}} — {{.Profile}}</h2><div class="fig">{{.SVG}}</div>
{{end}}
{{if .Cells}}<h2 id="web">Page loads over HTTP/3</h2>
<p>Medians per cell; PLT is loadEventEnd (plus the DNS time in decoupled mode), DNS the stub's time for the page's lookups. Δ is the median's change over DoUDP + H3 1-RTT in the same profile, page, stub state and DNS mode (the IMC 2022 slides' FCP and PLT relative to DoUDP). 0-RTT and resumed are the shares of loads whose HTTP/3 connection the server saw use them.</p>
<table id="web-cells"><tr><th class="l">dns mode</th><th class="l">stub</th><th class="l">profile</th><th class="l">page</th><th class="l">DNS</th><th class="l">H3</th><th>ok/n</th>
<th>PLT ms</th><th>FCP ms</th><th>DNS ms</th><th>ΔPLT</th><th>ΔFCP</th><th>0-RTT</th><th>resumed</th></tr>
{{range .Cells}}<tr><td class="l">{{.DNSMode}}</td><td class="l">{{.StubState}}</td><td class="l">{{.Profile}}</td><td class="l">{{.Page}}</td><td class="l">{{.Transport}}</td><td class="l">{{.H3}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{ms .PLT}}</td><td>{{ms .FCP}}</td><td>{{ms .DNS}}</td><td>{{pct .RelPLT}}</td><td>{{pct .RelFCP}}</td><td>{{share .Real0RTT}}</td><td>{{share .Resumed}}</td></tr>
{{end}}</table>{{end}}
{{if .HOL}}<h2 id="hol">Head-of-line blocking</h2>
<p>Queries over one connection per transport with Poisson arrivals; in the delayed run the server holds some answers back. Knock-on: queries not delayed themselves that took more than {{ms .Threshold}} ms beyond the baseline run's median.</p>
<table id="hol-summary"><tr><th class="l">profile</th><th class="l">transport</th><th>baseline median ms</th><th>delayed</th><th>knock-on</th><th>sum ms</th><th>max ms</th><th>failed</th></tr>
{{range .HOL}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Transport}}</td><td>{{f .BaselineMedian}}</td><td>{{.DelayedOwn}}</td><td>{{.KnockOn}}</td><td>{{ms .KnockOnSumMs}}</td><td>{{ms .KnockOnMaxMs}}</td><td>{{.Failed}}</td></tr>
{{end}}</table>{{end}}
{{if .Amp}}<h2 id="amplification">QUIC's amplification limit</h2>
<p>DoQ handshakes on new connections. Before it has validated the client's address a server may send three times what it received (RFC 9000 §8.1); a larger certificate chain makes it stall for the client's ACK. Client first flight and server first burst are octets from the client's qlog; stalled is the share of handshakes with a pause over half an RTT inside the server's flight.</p>
<table id="amp"><tr><th class="l">cert</th><th>octets</th><th class="l">key share</th><th class="l">validation</th><th>ok/n</th><th>handshake RTTs</th><th>total ms</th><th>client first flight</th><th>server first burst</th><th>stalled</th><th>Retry</th><th>token</th></tr>
{{range .Amp}}<tr><td class="l">{{.Cert}}</td><td>{{.CertOctets}}</td><td class="l">{{.KeyShare}}</td><td class="l">{{.Validation}}</td><td>{{.OK}}/{{.N}}</td><td>{{f .HandshakeRTTs}}</td><td>{{ms .TotalMs}}</td><td>{{ms .ClientFirstFlight}}</td><td>{{ms .ServerFirstBurst}}</td><td>{{share .Stalled}}</td><td>{{share .Retried}}</td><td>{{share .Token}}</td></tr>
{{end}}</table>{{end}}
{{if .Overhead}}<h2 id="overhead">Octets per resolution, by layer</h2>
<p>Captured at the testbed link and decrypted with the client's key log; per resolution (a connection's octets divided by the resolutions it carried), both directions, IP included. The single-query columns are medians over new connections in IP payload octets (the IMC 2022 slides' table): the handshake each way before the query and before the answer, the query and the response.</p>
<table id="overhead-cells"><tr><th class="l">cert</th><th class="l">mode</th><th class="l">transport</th><th>resolutions</th><th>octets</th><th>packets</th>{{range .Layers}}<th>{{.}}</th>{{end}}<th>single query</th><th>handshake c&gt;r</th><th>handshake r&gt;c</th><th>query</th><th>response</th></tr>
{{range .Overhead}}<tr><td class="l">{{.Cert}}</td><td class="l">{{.Mode}}</td><td class="l">{{.Transport}}</td><td>{{.Resolutions}}</td><td>{{ms .Octets}}</td><td>{{ms .Packets}}</td>{{range .Layers}}<td>{{ms .}}</td>{{end}}<td>{{ms .Total}}</td><td>{{ms .HandshakeUp}}</td><td>{{ms .HandshakeDown}}</td><td>{{ms .Query}}</td><td>{{ms .Response}}</td></tr>
{{end}}</table>{{end}}
{{if .Survey}}<h2 id="survey">Resolver survey</h2>
<p>From <code>doxlab verify</code>: the PAM paper's DoQ version breakdown and the DoH-cost paper's Tables 1-2.</p>
<pre>{{.Survey}}</pre>{{end}}
{{range .WebFigures}}<h2 id="{{.Name}}">{{.Metric}} — {{.Profile}}</h2><div class="fig">{{.SVG}}</div>
{{end}}</body></html>
`))

func writeHTML(rep *Report, figs, webFigs []figure, title string) error {
	var b bytes.Buffer
	if err := page.Execute(&b, map[string]any{"Title": title, "Stats": rep.Stats, "Figures": figs, "Cells": rep.Cells, "WebFigures": webFigs, "HOL": rep.HOL, "Threshold": hol.KnockOnThreshold, "Amp": rep.Amp, "Overhead": rep.Overhead, "Layers": overhead.LayerNames, "Survey": rep.Survey}); err != nil {
		return err
	}
	return os.WriteFile(rep.HTML, b.Bytes(), 0o644)
}

// Title names a report after the runs it covers.
func Title(runs []store.Run) string {
	kinds := map[string]bool{}
	for _, r := range runs {
		kinds[r.Kind] = true
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return "doxlab report: " + strings.Join(ks, ", ")
}

// Load reads what a report draws from a store alone: every sample and
// result of the runs whose ID starts with prefix ("" for all), with each
// run's link as the run recorded it, and the runs themselves.
func Load(ctx context.Context, st *store.Store, prefix string) (Input, []store.Run, error) {
	var in Input
	all, err := st.Rows(ctx, "") // by run ID exactly; the prefix is matched below
	if err != nil {
		return in, nil, err
	}
	for _, r := range all {
		if strings.HasPrefix(r.RunID, prefix) {
			in.Rows = append(in.Rows, r)
		}
	}
	profiles, err := dnsrtt.StoredProfiles(ctx, st)
	if err != nil {
		return in, nil, err
	}
	in.SerialMs = make([]float64, len(in.Rows))
	for i, r := range in.Rows {
		in.SerialMs[i] = math.NaN()
		if v, ok := dnsrtt.RowSerializationMs(profiles, r); ok {
			in.SerialMs[i] = v
		}
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return in, nil, err
	}
	runs = slices.DeleteFunc(runs, func(r store.Run) bool { return !strings.HasPrefix(r.ID, prefix) })
	if in.Loads, err = st.Loads(ctx, prefix); err != nil {
		return in, nil, err
	}
	if in.HOL, err = hol.Load(ctx, st, prefix); err != nil {
		return in, nil, err
	}
	if in.Amp, err = amplification.Load(ctx, st, prefix); err != nil {
		return in, nil, err
	}
	if in.Overhead, err = xoverhead.Load(ctx, st, prefix); err != nil {
		return in, nil, err
	}
	if in.Survey, err = verify.LoadSurvey(ctx, st, prefix); err != nil {
		return in, nil, err
	}
	return in, runs, nil
}

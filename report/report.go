// Package report renders stored samples as the papers' figures: CDFs of
// the DNS exchange, handshake and resolve time in multiples of the RTT
// per access profile and overall (cross-layer paper Fig. 5-7, PAM 2022
// Fig. 3), as PNG and SVG, a summary table (median, IQR, p95 in ms and
// RTTs), and one self-contained HTML page that shows them all.
package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/store"
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
}

// Report is what Render wrote.
type Report struct {
	Dir     string
	HTML    string   // the page
	Figures []string // PNG and SVG files
	Stats   []Stat
}

var order = map[string]int{"fiber": 0, "cable": 1, "dsl": 2, "4g": 3, "4g-medium": 4, "none": 5,
	"udp": 0, "tcp": 1, "dot": 2, "doh1": 3, "doh2": 4, "doh3": 5, "doq": 6, "fresh": 0, "pam": 1, "resumed": 2, "0rtt": 3}

func less(a, b string) bool {
	oa, aok := order[a]
	ob, bok := order[b]
	if aok && bok {
		return oa < ob
	}
	if aok != bok {
		return aok
	}
	return a < b
}

// Render draws rows into dir.
func Render(rows []store.Row, dir, title string) (*Report, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("no samples to report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Dir: dir, HTML: filepath.Join(dir, "report.html")}
	profiles := uniq(rows, func(r store.Row) string { return orNone(r.Profile) })
	var figs []figure
	for _, m := range Metrics {
		for _, p := range append([]string{"all"}, profiles...) {
			var sel []store.Row
			for _, r := range rows {
				if p == "all" || orNone(r.Profile) == p {
					sel = append(sel, r)
				}
			}
			name := fmt.Sprintf("cdf-%s-%s", m.Name, p)
			svg, err := cdf(sel, m.Get, fmt.Sprintf("%s — %s", m.Title, p), filepath.Join(dir, name))
			if err != nil {
				return nil, err
			}
			rep.Figures = append(rep.Figures, filepath.Join(dir, name+".png"), filepath.Join(dir, name+".svg"))
			figs = append(figs, figure{Name: name, Metric: m.Name, Profile: p, SVG: template.HTML(svg)})
		}
	}
	rep.Stats = stats(rows)
	if err := writeHTML(rep, figs, title); err != nil {
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
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

// series are one line of a CDF: a transport under a condition.
type series struct {
	transport, condition string
	values               []float64
}

var palette = map[string]color.Color{
	"udp": color.RGBA{0x4d, 0x4d, 0x4d, 0xff}, "tcp": color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, "dot": color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	"doh1": color.RGBA{0xe3, 0x77, 0xc2, 0xff}, "doh2": color.RGBA{0xd6, 0x27, 0x28, 0xff}, "doh3": color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	"doq": color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

var dashes = map[string][]vg.Length{"fresh": nil, "pam": {vg.Points(1), vg.Points(2)}, "resumed": {vg.Points(5), vg.Points(3)}, "0rtt": {vg.Points(2), vg.Points(2)}}

// cdf draws one CDF figure to base.png and base.svg and returns the SVG.
func cdf(rows []store.Row, get func(store.Row) *float64, title, base string) ([]byte, error) {
	groups := map[[2]string]*series{}
	var keys [][2]string
	for _, r := range rows {
		v := get(r)
		if v == nil || math.IsNaN(*v) {
			continue
		}
		k := [2]string{r.Transport, r.Condition}
		if groups[k] == nil {
			groups[k] = &series{transport: r.Transport, condition: r.Condition}
			keys = append(keys, k)
		}
		groups[k].values = append(groups[k].values, *v)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return less(keys[i][0], keys[j][0])
		}
		return less(keys[i][1], keys[j][1])
	})
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "multiples of the RTT"
	p.Y.Label.Text = "CDF"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(8)
	for _, k := range keys {
		s := groups[k]
		slices.Sort(s.values)
		pts := make(plotter.XYs, 0, 2*len(s.values))
		for i, v := range s.values {
			pts = append(pts, plotter.XY{X: v, Y: float64(i) / float64(len(s.values))}, plotter.XY{X: v, Y: float64(i+1) / float64(len(s.values))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = palette[s.transport]
		if l.Color == nil {
			l.Color = color.Black
		}
		l.Width = vg.Points(1.5)
		l.Dashes = dashes[s.condition]
		p.Add(l)
		p.Legend.Add(s.transport+" "+s.condition, l)
	}
	if len(keys) == 0 {
		p.Title.Text += " (no data)"
	} else {
		// Room on the right for the legend, so it never covers a line.
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range groups {
			lo, hi = min(lo, s.values[0]), max(hi, s.values[len(s.values)-1])
		}
		span := max(hi-lo, 0.5)
		p.X.Min, p.X.Max = max(0, lo-0.05*span), hi+0.45*span
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for _, ext := range []string{".png", ".svg"} {
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, base+ext); err != nil {
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
func stats(rows []store.Row) []Stat {
	type key struct{ p, t, c string }
	groups := map[key][]store.Row{}
	for _, r := range rows {
		k := key{orNone(r.Profile), r.Transport, r.Condition}
		groups[k] = append(groups[k], r)
	}
	var out []Stat
	for k, g := range groups {
		st := Stat{Profile: k.p, Transport: k.t, Condition: k.c, N: len(g)}
		var ms, rtt []float64
		for _, r := range g {
			if r.TotalMs != nil && r.TotalRTT != nil {
				st.OK++
				ms, rtt = append(ms, *r.TotalMs), append(rtt, *r.TotalRTT)
			}
		}
		slices.Sort(ms)
		slices.Sort(rtt)
		st.MedianMs, st.IQRMs, st.P95Ms = quantile(ms, 0.5), quantile(ms, 0.75)-quantile(ms, 0.25), quantile(ms, 0.95)
		st.MedianRTT, st.IQRRTT, st.P95RTT = quantile(rtt, 0.5), quantile(rtt, 0.75)-quantile(rtt, 0.25), quantile(rtt, 0.95)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Profile != b.Profile {
			return less(a.Profile, b.Profile)
		}
		if a.Condition != b.Condition {
			return less(a.Condition, b.Condition)
		}
		return less(a.Transport, b.Transport)
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
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}h2{margin-top:2em}.fig svg{max-width:100%;height:auto}
</style></head><body>
<h1>{{.Title}}</h1>
<p>Every duration is divided by the RTT probed on the same port and protocol just after the exchange. Summary of the DNS exchange (total) per access profile, transport and condition.</p>
<table id="summary"><tr><th class="l">profile</th><th class="l">transport</th><th class="l">condition</th><th>ok/n</th>
<th>median ms</th><th>IQR ms</th><th>p95 ms</th><th>median RTT</th><th>IQR RTT</th><th>p95 RTT</th></tr>
{{range .Stats}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Transport}}</td><td class="l">{{.Condition}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{f .MedianMs}}</td><td>{{f .IQRMs}}</td><td>{{f .P95Ms}}</td><td>{{f .MedianRTT}}</td><td>{{f .IQRRTT}}</td><td>{{f .P95RTT}}</td></tr>
{{end}}</table>
{{range .Figures}}<h2 id="{{.Name}}">{{.Metric}} — {{.Profile}}</h2><div class="fig">{{.SVG}}</div>
{{end}}</body></html>
`))

func writeHTML(rep *Report, figs []figure, title string) error {
	var b bytes.Buffer
	if err := page.Execute(&b, map[string]any{"Title": title, "Stats": rep.Stats, "Figures": figs}); err != nil {
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

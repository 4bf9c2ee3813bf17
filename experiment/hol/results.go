package hol

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/protocol"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/store"
)

// Queries are the stored queries of hol runs.
type Queries []*Query

// Load reads the queries of the runs whose IDs start with prefix.
func (c *HOL) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	qs, err := experiment.LoadResults[Query](ctx, st, KindQuery, experiment.OfExperiment(prefix))
	return Queries(qs), err
}

// Count is the number of queries.
func (qs Queries) Count() (int, string) { return len(qs), "head-of-line queries" }

// WriteTable writes the knock-on delay per profile and transport.
func (qs Queries) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "knock-on: not delayed itself, but slower than the baseline median by more than %.0f ms\n", KnockOnThreshold)
	fmt.Fprintf(w, "%-10s %-12s %12s %-16s %8s %8s %12s %10s %7s\n", "profile", "transport", "baseline ms", "95% CI (n)", "delayed", "knock-on", "sum ms", "max ms", "failed")
	for _, s := range Summarize(qs) {
		if _, err := fmt.Fprintf(w, "%-10s %-12s %12s %-16s %8d %8d %12.0f %10.0f %7d\n", s.Profile, s.Transport, stats.F(s.BaselineMedian, 2), fmt.Sprintf("%s (%d)", s.Baseline.CI(2), s.Baseline.N), s.DelayedOwn, s.KnockOn, s.KnockOnSumMs, s.KnockOnMaxMs, s.Failed); err != nil {
			return err
		}
	}
	return nil
}

var table = experiment.Table("hol", `<table id="hol-summary"><tr><th class="l">profile</th><th class="l">transport</th><th>baseline median ms</th><th>95 % CI (n)</th><th>delayed</th><th>knock-on</th><th>sum ms</th><th>max ms</th><th>failed</th></tr>
{{range .}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Transport}}</td><td>{{f .BaselineMedian}}</td><td>{{ci .Baseline}} ({{.Baseline.N}})</td><td>{{.DelayedOwn}}</td><td>{{.KnockOn}}</td><td>{{ms .KnockOnSumMs}}</td><td>{{ms .KnockOnMaxMs}}</td><td>{{.Failed}}</td></tr>
{{end}}</table>`)

// Section is the report's part: the knock-on table, and the DoH-cost
// paper's Fig. 2 per profile and transport: each query's resolution time
// against its send time in the run with delayed answers, the delayed
// queries themselves marked.
func (qs Queries) Section(dir string) (*experiment.Section, error) {
	delayed := slices.DeleteFunc(slices.Clone(qs), func(q *Query) bool { return q.Run != "delayed" || q.Status != "ok" })
	profiles, byProfile := order.Group(delayed, func(q *Query) string { return q.Profile })
	set := &figure.Set{Dir: dir}
	for _, prof := range profiles {
		// Small multiples: a panel per transport, on the same axes.
		transports, byTransport := order.Group(byProfile[prof], func(q *Query) string { return q.Transport })
		data := figure.Data{Header: []string{"transport", "sent (s)", "resolution time (ms)", "delayed by the server"}}
		var panels []*plot.Plot
		var xMax, yMax float64
		for _, t := range transports {
			var own, others plotter.XYs
			for _, q := range byTransport[t] {
				pt := plotter.XY{X: q.SendMs / 1000, Y: q.ResolveMs}
				xMax, yMax = max(xMax, pt.X), max(yMax, pt.Y)
				data.Add(t, pt.X, pt.Y, q.Delayed)
				if q.Delayed {
					own = append(own, pt)
				} else {
					others = append(others, pt)
				}
			}
			p := plot.New()
			p.Title.Text = t
			p.X.Label.Text = "query sent (s)"
			p.Y.Label.Text = "resolution time (ms)"
			p.Add(plotter.NewGrid())
			for _, s := range []struct {
				pts   plotter.XYs
				label string
				shape draw.GlyphDrawer
				red   bool
			}{
				{others, "not delayed itself", draw.CircleGlyph{}, false},
				{own, "delayed by the server", draw.CrossGlyph{}, true},
			} {
				if len(s.pts) == 0 {
					continue
				}
				sc, err := plotter.NewScatter(s.pts)
				if err != nil {
					return nil, err
				}
				sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = figure.Blue, s.shape, vg.Points(2)
				if s.red {
					sc.GlyphStyle.Color = figure.Red
				}
				p.Add(sc)
				if len(panels) == 0 {
					p.Legend.Add(s.label, sc)
				}
			}
			panels = append(panels, p)
		}
		for _, p := range panels {
			p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, xMax*1.02, 0, yMax*1.05
		}
		panels = append(panels, figure.LegendPanel(panels[0]))
		grid := figure.Rows(panels, 3)
		if err := set.AddGrid(grid, "hol-"+prof, "Fig. 2: head-of-line blocking, each query's resolution time in the run with delayed answers", "profile "+prof,
			10*vg.Inch, vg.Length(2.6*float64(len(grid)))*vg.Inch, data); err != nil {
			return nil, err
		}
	}
	intro := fmt.Sprintf("Queries over one connection per transport with Poisson arrivals; in the delayed run the server holds some answers back. Knock-on: queries not delayed themselves that took more than %.1f ms beyond the baseline run's median.", KnockOnThreshold)
	return experiment.NewSection("hol", "Head-of-line blocking", template.HTML(template.HTMLEscapeString(intro)), table, Summarize(qs), set)
}

// Findings checks the DoH-cost paper's §3 claim (Fig. 2): transports that
// answer in order (DoT as servers run it, DoH/1.1) suffer head-of-line
// blocking; UDP and DoH/2 do not, nor does QUIC's stream per query.
func (qs Queries) Findings() []experiment.Finding {
	knock := map[string]int{}
	seen := map[string]bool{}
	for _, s := range Summarize(qs) {
		knock[s.Transport] += s.KnockOn
		seen[s.Transport] = true
	}
	// The fewest answered queries of the delayed run of a transport.
	answered := map[string]int{}
	for _, q := range qs {
		if q.Run == "delayed" && q.Status == "ok" {
			answered[q.Transport]++
		}
	}
	n := -1
	for t := range seen {
		if n < 0 || answered[t] < n {
			n = answered[t]
		}
	}
	// The transports measured that answer in order, and those whose
	// queries travel apart, from the protocol table; plain TCP and DoT
	// are neither.
	var inOrder, apart []string
	for _, t := range protocol.WithVariants() {
		switch {
		case !seen[t]:
		case protocol.AnswersInOrder(t):
			inOrder = append(inOrder, t)
		case protocol.Independent(t):
			apart = append(apart, t)
		}
	}
	list := func(ts []string) string {
		var parts []string
		for _, t := range ts {
			parts = append(parts, fmt.Sprintf("%s %d", t, knock[t]))
		}
		return strings.Join(parts, ", ")
	}
	blocking, free := list(inOrder), list(apart)
	v := experiment.NoData
	if len(inOrder) > 0 && len(apart) > 0 {
		v = experiment.Holds
		for _, t := range inOrder {
			if knock[t] == 0 {
				v = experiment.Differs
			}
		}
		for _, t := range apart {
			if knock[t] > 0 {
				v = experiment.Differs
			}
		}
	}
	return []experiment.Finding{{
		Claim:   "In-order DoT and DoH/1.1 suffer head-of-line blocking; UDP, DoH/2 and QUIC do not",
		Source:  "DoH-cost paper §3, Fig. 2",
		Paper:   "knock-on delays after each held answer over TLS and HTTP/1.1; none over UDP and HTTP/2",
		Here:    fmt.Sprintf("queries slowed by another's delay: %s; %s", orNone(blocking), orNone(free)),
		Why:     "holds when every in-order transport shows knock-on and no other does",
		Figure:  "hol",
		Verdict: v,
		N:       max(n, 0),
	}}
}

func orNone(s string) string {
	if s == "" {
		return "none measured"
	}
	return s
}

// Cells are the baseline medians as numbers.
func (qs Queries) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, s := range Summarize(qs) {
		out = append(out, experiment.NewCell("hol", map[string]string{"profile": s.Profile, "transport": s.Transport}, "baseline_ms", s.Baseline.N, s.Baseline))
	}
	return out
}

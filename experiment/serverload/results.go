package serverload

import (
	"context"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"regexp"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/store"
)

// Benches are stored benchmarks: this experiment's steps, and every
// `doxlab bench --store` run.
type Benches []*bench.Stored

// Load reads the benchmarks of the runs whose IDs start with prefix (""
// for every benchmark stored, the CLI's included).
func (c *ServerLoad) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	bs, err := bench.LoadAggregated(ctx, st, experiment.OfExperiment(prefix), func(r bench.Record) time.Duration {
		return window(time.Duration(r.ElapsedS*float64(time.Second)), r.AnsweredQPS)
	})
	return Benches(bs), err
}

// Count is the number of benchmarks.
func (bs Benches) Count() (int, string) { return len(bs), "benchmarks" }

// Row is one benchmark's line in the tables.
type Row struct {
	Run, Name, Policy, Mode                  string
	Conns                                    int
	Intended, Achieved, Answered             float64 // queries/s
	Sent, Lost                               int
	Unsent                                   int     // open loop: due, never sent (bench.Result.Unsent)
	P50, P99, P999, Max, ServiceP50, CPUPerQ float64 // ms; CPU µs per query
	Held                                     string  // yes, no, or "" outside a stepped run
}

// Summarize gives a row per benchmark, in the order they ran.
func Summarize(bs Benches) []Row {
	var rows []Row
	for _, b := range bs {
		r := Row{Run: b.Run, Name: b.Name(), Policy: b.Policy, Mode: b.Mode, Conns: b.Conns,
			Intended: b.IntendedQPS, Achieved: b.AchievedQPS, Answered: b.AnsweredQPS, Sent: b.Sent, Lost: b.Sent - b.Summary.Answered, Unsent: b.Unsent,
			P50: b.Latency.P["50"], P99: b.Latency.P["99"], P999: b.Latency.P["99.9"], Max: b.Latency.Max,
			ServiceP50: b.Service.P["50"], CPUPerQ: b.CPUPerQueryUs}
		if b.Bound != nil {
			r.Held = map[bool]string{true: "yes", false: "no"}[b.Held]
		}
		rows = append(rows, r)
	}
	return rows
}

// WriteTable writes a line per benchmark.
func (bs Benches) WriteTable(w io.Writer) error {
	fmt.Fprintln(w, "latency from each query's intended send time (open loop); service from the call")
	fmt.Fprintln(w, "unsent: due in the open loop's schedule but never sent (no room in flight until the end)")
	fmt.Fprintf(w, "%-14s %-7s %5s %9s %9s %9s %7s %7s %9s %9s %9s %9s %8s %5s\n", "benchmark", "policy", "conns", "intended", "achieved", "answered", "lost", "unsent", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "cpu µs/q", "held")
	run := ""
	for _, r := range Summarize(bs) {
		if r.Run != run {
			fmt.Fprintf(w, "run %s\n", r.Run)
			run = r.Run
		}
		if _, err := fmt.Fprintf(w, "%-14s %-7s %5d %9.0f %9.0f %9.0f %7d %7d %9.3f %9.3f %9.3f %9.3f %8.1f %5s\n", r.Name, r.Policy, r.Conns,
			r.Intended, r.Achieved, r.Answered, r.Lost, r.Unsent, r.P50, r.P99, r.P999, r.Max, r.CPUPerQ, r.Held); err != nil {
			return err
		}
	}
	return nil
}

var table = experiment.Table("server-load", `<table id="server-load-summary"><tr><th class="l">run</th><th class="l">benchmark</th><th class="l">policy</th><th>conns</th><th>intended /s</th><th>achieved /s</th><th>answered /s</th><th>lost</th><th title="due in the open loop's schedule but never sent: no room in flight until the end">unsent</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>service p50 ms</th><th>client CPU µs/query</th><th>held</th></tr>
{{range .}}<tr><td class="l">{{.Run}}</td><td class="l">{{.Name}}</td><td class="l">{{.Policy}}</td><td>{{.Conns}}</td><td>{{printf "%.0f" .Intended}}</td><td>{{printf "%.0f" .Achieved}}</td><td>{{printf "%.0f" .Answered}}</td><td>{{.Lost}}</td><td>{{.Unsent}}</td><td>{{printf "%.3f" .P50}}</td><td>{{printf "%.3f" .P99}}</td><td>{{printf "%.3f" .P999}}</td><td>{{printf "%.3f" .Max}}</td><td>{{printf "%.3f" .ServiceP50}}</td><td>{{ms .CPUPerQ}}</td><td>{{.Held}}</td></tr>
{{end}}</table>`)

// Section draws the rate each transport held (stepped runs), and for the
// benchmarks worth a closer look (each transport's highest rate held and
// the first it did not; every single run) the latency over time, the
// answers per second over time and the percentile spectrum.
func (bs Benches) Section(dir string) (*experiment.Section, error) {
	set := &figure.Set{Dir: dir}
	if err := rateFigure(set, bs); err != nil {
		return nil, err
	}
	picked := pick(bs, 12)
	if len(picked) > 0 {
		if err := timeFigures(set, picked); err != nil {
			return nil, err
		}
		if err := spectrumFigure(set, picked); err != nil {
			return nil, err
		}
	}
	intro := "Open-loop load (doxlab bench): every query has an intended send time and its latency counts from it, so a server that falls behind shows as latency, not as a lower rate. Stepped runs double the rate until the p99 latency or the loss breaks the bound. Client and server share this machine's cores; each run's record says how many."
	return experiment.NewSection("server-load", "Server load", template.HTML(template.HTMLEscapeString(intro)), table, Summarize(bs), set)
}

// colour is a benchmark's line colour: its transport's, else black.
func colour(b *bench.Stored) color.Color {
	if c, ok := figure.Colors[b.Protocol]; ok {
		return c
	}
	return color.Black
}

// glyph is a benchmark's marker: its transport's, else none.
func glyph(b *bench.Stored) draw.GlyphDrawer { return figure.Glyphs[b.Protocol] }

// series groups benchmarks by run and label: one stepped run each, or a
// single run.
func series(bs Benches) ([]string, map[string][]*bench.Stored) {
	return order.Group(bs, func(b *bench.Stored) string { return b.Run + " " + b.Label + " " + b.Policy + fmt.Sprint(b.Conns) })
}

// pick chooses at most n benchmarks to draw over time: per stepped
// series the highest rate held and the first not held, and every single
// run.
func pick(bs Benches, n int) []*bench.Stored {
	keys, by := series(bs)
	var out []*bench.Stored
	for _, k := range keys {
		s := by[k]
		if s[0].Step < 0 {
			out = append(out, s...)
			continue
		}
		var held, broke *bench.Stored
		for _, b := range s {
			if b.Held {
				held = b
			} else if broke == nil {
				broke = b
			}
		}
		for _, b := range []*bench.Stored{held, broke} {
			if b != nil {
				out = append(out, b)
			}
		}
	}
	return out[:min(n, len(out))]
}

// title names a benchmark in a panel; the run too when several are drawn.
func title(b *bench.Stored, runs bool) string {
	t := b.Name()
	if b.Bound != nil && !b.Held {
		t += " (not held)"
	}
	if runs {
		t = shortRun(b.Run) + " " + t
	}
	return t
}

var runTime = regexp.MustCompile(`\d{8}T(\d\d)(\d\d)(\d\d)Z`)

// shortRun names a run by the time it began, for legends: 18:39:22.
func shortRun(id string) string {
	if m := runTime.FindStringSubmatch(id); m != nil {
		return m[1] + ":" + m[2] + ":" + m[3]
	}
	return id
}

func manyRuns(bs []*bench.Stored) bool {
	return slices.ContainsFunc(bs, func(b *bench.Stored) bool { return b.Run != bs[0].Run })
}

// addLine draws pts in c with dashes, marked with g (nil: no marks),
// and names it in the legend unless label is "".
func addLine(p *plot.Plot, pts plotter.XYs, c color.Color, g draw.GlyphDrawer, dashes []vg.Length, label string) error {
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1.5), dashes
	p.Add(l)
	thumbs := []plot.Thumbnailer{l}
	if m := figure.Marks(pts, c, g, len(pts)); m != nil {
		p.Add(m)
		thumbs = append(thumbs, m)
	}
	if label != "" {
		p.Legend.Add(label, thumbs...)
	}
	return nil
}

// rateFigure: per stepped series, the answers per second and the p99
// latency against the intended rate.
func rateFigure(set *figure.Set, bs Benches) error {
	keys, by := series(bs)
	answered, p99 := plot.New(), plot.New()
	answered.Title.Text, p99.Title.Text = "answers per second", "p99 latency from the intended send time"
	answered.X.Label.Text, p99.X.Label.Text = "intended rate (queries/s)", "intended rate (queries/s)"
	answered.Y.Label.Text, p99.Y.Label.Text = "answered (queries/s)", "p99 (ms)"
	answered.Add(plotter.NewGrid())
	p99.Add(plotter.NewGrid())
	figure.LogY(p99)
	data := figure.Data{Header: []string{"run", "benchmark", "intended qps", "answered qps", "p99 ms", "held"}}
	runs := manyRuns(bs)
	top := 0.0
	for _, k := range keys {
		s := by[k]
		if s[0].Step < 0 || s[0].Mode != "open-loop" {
			continue
		}
		var a, l plotter.XYs
		for _, b := range s {
			a = append(a, plotter.XY{X: b.IntendedQPS, Y: b.AnsweredQPS})
			l = append(l, plotter.XY{X: b.IntendedQPS, Y: max(b.Latency.P["99"], 0.001)})
			top = max(top, b.IntendedQPS)
			data.Add(b.Run, b.Label, b.IntendedQPS, b.AnsweredQPS, b.Latency.P["99"], b.Held)
		}
		label := s[0].Label
		if runs {
			label = shortRun(s[0].Run) + " " + label
		}
		if err := addLine(answered, a, colour(s[0]), glyph(s[0]), nil, label); err != nil {
			return err
		}
		if err := addLine(p99, l, colour(s[0]), glyph(s[0]), nil, ""); err != nil {
			return err
		}
		if s[0].Bound != nil {
			bound := float64(s[0].Bound.P99) / float64(time.Millisecond)
			if err := addLine(p99, plotter.XYs{{X: s[0].IntendedQPS, Y: bound}, {X: s[len(s)-1].IntendedQPS, Y: bound}}, color.Gray{0x99}, nil, []vg.Length{vg.Points(3), vg.Points(3)}, ""); err != nil {
				return err
			}
		}
	}
	if top == 0 {
		return nil
	}
	// The rate a server keeps up with lies on the diagonal.
	if err := addLine(answered, plotter.XYs{{X: 0, Y: 0}, {X: top, Y: top}}, color.Gray{0x99}, nil, []vg.Length{vg.Points(3), vg.Points(3)}, "intended"); err != nil {
		return err
	}
	answered.Legend.Top, answered.Legend.Left = true, true
	return set.AddGrid([][]*plot.Plot{{answered, p99}}, "server-load-rate", "The rate held: answers per second and p99 latency as the intended rate doubles",
		"dashed: the intended rate, and the p99 bound", 10*vg.Inch, 4*vg.Inch, data)
}

// window is the time step of the over-time figures for a run of d at
// rate answers per second: 50 steps, each of 50 answers at least.
func window(d time.Duration, rate float64) time.Duration {
	w := max(d/50, 10*time.Millisecond)
	if rate > 0 {
		w = max(w, time.Duration(50/rate*float64(time.Second)))
	}
	return min(w, time.Second)
}

// timeFigures: per benchmark a panel of p50, p90 and max latency per
// window of intended send times (a window holds too few answers for a
// p99 that is not its max: the spectrum shows the tail), and one of the
// answers per second.
func timeFigures(set *figure.Set, picked []*bench.Stored) error {
	runs := manyRuns(picked)
	var lat, thr []*plot.Plot
	latData := figure.Data{Header: []string{"run", "benchmark", "window start s", "p50 ms", "p90 ms", "max ms", "answered qps", "failed"}}
	for _, b := range picked {
		span := time.Duration(b.ElapsedS * float64(time.Second))
		agg := b.Agg
		w := agg.Window
		var p50, p90, pmax, rate plotter.XYs
		// The last window ends with the sending, not with the run (which
		// waits for the last answers): at the last send plus one gap. Its
		// rate is over what it covered, and a sliver under a tenth of a
		// window says nothing of a rate.
		end := span
		if b.Mode == "open-loop" && b.IntendedQPS > 0 && len(agg.Windows) > 0 {
			end = agg.LastAt + time.Duration(float64(time.Second)/b.IntendedQPS)
		}
		for i, win := range agg.Windows {
			at := time.Duration(i) * w
			d := min(w, end-at)
			if d < w/10 {
				break
			}
			x := at.Seconds()
			if win.Answered > 0 {
				q := win.Latency.Quantile
				p50 = append(p50, plotter.XY{X: x, Y: q(0.5)})
				p90 = append(p90, plotter.XY{X: x, Y: q(0.9)})
				pmax = append(pmax, plotter.XY{X: x, Y: q(1)})
				latData.Add(b.Run, b.Name(), x, q(0.5), q(0.9), q(1), float64(win.Answered)/d.Seconds(), win.Failed)
			}
			rate = append(rate, plotter.XY{X: x, Y: float64(win.Answered) / d.Seconds()})
		}
		lp := plot.New()
		lp.Title.Text = title(b, runs)
		lp.X.Label.Text, lp.Y.Label.Text = "intended send time (s)", "latency (ms)"
		lp.Add(plotter.NewGrid())
		figure.LogY(lp)
		c := colour(b)
		for _, l := range []struct {
			pts    plotter.XYs
			label  string
			dashes []vg.Length
		}{{p50, "p50", nil}, {p90, "p90", []vg.Length{vg.Points(4), vg.Points(2)}}, {pmax, "max", []vg.Length{vg.Points(1), vg.Points(2)}}} {
			if err := addLine(lp, l.pts, c, glyph(b), l.dashes, l.label); err != nil {
				return err
			}
		}
		lp.Legend.Top = true
		if lp.Y.Min > 0 && lp.Y.Max > lp.Y.Min {
			// Two fifths more of the log axis on top: the legend's three
			// lines sit above the data, not over its peaks.
			lp.Y.Max *= math.Pow(lp.Y.Max/lp.Y.Min, 0.4)
		}
		lat = append(lat, lp)
		tp := plot.New()
		tp.Title.Text = title(b, runs)
		tp.X.Label.Text, tp.Y.Label.Text = "intended send time (s)", "answered (queries/s)"
		tp.Add(plotter.NewGrid())
		tp.Y.Min = 0
		if err := addLine(tp, rate, c, glyph(b), nil, "answered"); err != nil {
			return err
		}
		if b.Mode == "open-loop" && len(rate) > 0 {
			if err := addLine(tp, plotter.XYs{{X: 0, Y: b.IntendedQPS}, {X: rate[len(rate)-1].X, Y: b.IntendedQPS}}, color.Gray{0x99}, nil, []vg.Length{vg.Points(3), vg.Points(3)}, "intended"); err != nil {
				return err
			}
		}
		tp.Legend.Top = true
		tp.Y.Max *= 1.3 // room above the lines for the legend
		tp.Y.Tick.Marker = figure.PlainTicks{}
		thr = append(thr, tp)
	}
	rows := func(ps []*plot.Plot) [][]*plot.Plot { return figure.Rows(ps, 2) }
	h := func(n int) vg.Length { return vg.Length(2.8*float64((n+1)/2)) * vg.Inch }
	if err := set.AddGrid(rows(lat), "server-load-latency", "Latency over time: p50, p90 and max per window of intended send times",
		"each transport at its highest rate held, and the first it did not hold", 10*vg.Inch, h(len(lat)), latData); err != nil {
		return err
	}
	return set.AddGrid(rows(thr), "server-load-throughput", "Throughput over time: answers per second per window",
		"dashed: the intended rate", 10*vg.Inch, h(len(thr)), latData)
}

// spectrumFigure: the latency at each percentile, on an axis that
// spreads the tail (HdrHistogram's percentile distribution plot).
func spectrumFigure(set *figure.Set, picked []*bench.Stored) error {
	runs := manyRuns(picked)
	p := plot.New()
	p.Title.Text = "Percentile spectrum of the latency from the intended send time"
	p.X.Label.Text, p.Y.Label.Text = "percentile", "latency (ms)"
	p.Add(plotter.NewGrid())
	figure.LogY(p)
	var ticks plot.ConstantTicks
	for i, l := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: l})
	}
	p.X.Tick.Marker = ticks
	data := figure.Data{Header: []string{"run", "benchmark", "percentile", "latency ms"}}
	xMax := 0.0
	seen := map[string]int{} // lines of one colour so far
	patterns := [][]vg.Length{nil, {vg.Points(6), vg.Points(2)}, {vg.Points(1), vg.Points(2)}, {vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}}
	for _, b := range picked {
		lats := b.Agg.Latency
		if lats.N() == 0 {
			continue
		}
		n := float64(lats.N())
		// x = log10(1/(1-q)): 1 at p90, 2 at p99, ...; 200 points from the
		// fastest answer (x = 0) to the last percentile n samples reach.
		var pts plotter.XYs
		last := math.Log10(n)
		for i := 0; i <= 200; i++ {
			x := last * float64(i) / 200
			q := 1 - math.Pow(10, -x)
			v := lats.Quantile(q)
			pts = append(pts, plotter.XY{X: x, Y: v})
			data.Add(b.Run, b.Name(), 100*q, v)
		}
		xMax = max(xMax, last)
		dashes := patterns[seen[b.Protocol]%len(patterns)]
		seen[b.Protocol]++
		if err := addLine(p, pts, colour(b), glyph(b), dashes, title(b, runs)); err != nil {
			return err
		}
	}
	p.X.Min, p.X.Max = 0, math.Ceil(xMax)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return set.Add(p, "server-load-spectrum", "Percentile spectrum: latency at each percentile, the tail spread out",
		"one colour per transport; lines of one transport told apart by their dashes", 9*vg.Inch, 5*vg.Inch, data)
}

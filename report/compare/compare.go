// Package compare sets runs against each other the way benchstat sets
// benchmark results: per cell (resolver × transport × condition), each
// column's median with its 95 % interval, and every later column against
// the first, with the relative change of the medians and the
// Mann-Whitney test. Columns are runs (in one store or two) or the
// rounds of one campaign run.
package compare

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/web"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/printable"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Source is where a column's samples are: the runs f selects in st.
type Source struct {
	Name  string // as the table heads the column: a run ID, "round 2"
	Store *store.Store
	Where string // the store, redacted, for the page
	store.Filter
}

// Cell is what a row compares.
type Cell struct{ Target, Transport, Condition string }

// Row is a cell's statistics in every column.
type Row struct {
	Cell
	Columns []Column
}

// Column is one column of a row: the total in ms of the answered
// samples, the failures, and (past the first) the comparison with the
// first.
type Column struct {
	N      int // samples, answered or not
	Ms     stats.Summary
	Failed map[string]int
	Versus stats.Comparison // with the first column; zero in the first
	dist   *stats.Dist
}

// Table is the comparison: its columns' names and a row per cell.
type Table struct {
	Kind     Kind
	Names    []string
	Wheres   []string
	Rows     []Row
	OKRcodes []string
}

// Kind is what a table compares.
type Kind struct {
	ID     string // the report's section and JSON table
	Title  string // what is timed
	Row    string // what a row is
	Metric string // the JSON cells' metric
}

var (
	// DNS compares DNS exchanges per resolver, transport and condition.
	DNS = Kind{"compare", "DNS exchange", "resolver", "total_ms"}
	// Pages compares page loads per page, DNS transport and setting.
	Pages = Kind{"compare-pages", "PLT", "page", "plt_ms"}
)

// Runs compares the DNS samples of two or more sources, in order.
func Runs(ctx context.Context, answers measure.Answers, srcs ...Source) (*Table, error) {
	return read(DNS, answers, srcs, func(src Source, c cells) error {
		return src.Store.EachRow(ctx, src.Filter, func(r *store.Row) error {
			c.add(r, answers)
			return nil
		})
	})
}

// PageLoads compares the page loads of two or more sources, in order:
// the testbed's and the campaigns', per page, DNS transport and setting.
func PageLoads(ctx context.Context, srcs ...Source) (*Table, error) {
	return read(Pages, measure.Answers{}, srcs, func(src Source, c cells) error {
		return web.EachPageTime(ctx, src.Store, src.Filter, func(x web.PageTime) {
			c.addTime(Cell{x.Page, x.Transport, x.Setting}, x.Status, x.PLTMs)
		})
	})
}

// read fills a table of kind with a column per source.
func read(kind Kind, answers measure.Answers, srcs []Source, each func(Source, cells) error) (*Table, error) {
	t := &Table{Kind: kind, OKRcodes: answers.Rcodes()}
	cols := make([]cells, len(srcs))
	for i, src := range srcs {
		t.Names, t.Wheres = append(t.Names, src.Name), append(t.Wheres, src.Where)
		cols[i] = cells{}
		if err := each(src, cols[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
	}
	t.fill(cols)
	return t, nil
}

// Rounds compares the rounds of the runs src selects (a campaign in
// rounds): a column per round, from the first.
func Rounds(ctx context.Context, answers measure.Answers, src Source) (*Table, error) {
	byRound := map[int64]cells{}
	err := src.Store.EachRow(ctx, src.Filter, func(r *store.Row) error {
		m := byRound[r.Round]
		if m == nil {
			m = cells{}
			byRound[r.Round] = m
		}
		m.add(r, answers)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rounds := slices.Sorted(maps.Keys(byRound))
	if len(rounds) < 2 {
		return nil, fmt.Errorf("the selected runs have %d round(s): rounds are compared in a campaign measured in rounds", len(rounds))
	}
	t := &Table{Kind: DNS, OKRcodes: answers.Rcodes()}
	var cols []cells
	for _, r := range rounds {
		t.Names, t.Wheres = append(t.Names, fmt.Sprintf("round %d", r)), append(t.Wheres, src.Where)
		cols = append(cols, byRound[r])
	}
	t.fill(cols)
	return t, nil
}

// col is one column's samples, by cell, as read.
type col struct {
	n      int
	failed map[string]int
	ms     *stats.Dist
}

// cells are a column's samples by cell.
type cells map[Cell]*col

// add adds a DNS row: timed if it answered, counted by what it failed
// with otherwise; rows of cancelled tasks are no samples.
func (m cells) add(r *store.Row, answers measure.Answers) {
	if transport.Status(r.Status) == transport.StatusCanceled {
		return
	}
	o := answers.Outcome(transport.Status(r.Status), r.Rcode)
	ms := 0.0
	if r.TotalMs != nil {
		ms = *r.TotalMs
	}
	if o == "" {
		o = "ok"
	}
	m.addTime(Cell{r.Target, r.Transport, r.Condition}, o, ms)
}

// addTime adds a sample of cell k: timed when its status is ok, else
// counted by it.
func (m cells) addTime(k Cell, status string, ms float64) {
	c := m[k]
	if c == nil {
		c = &col{failed: map[string]int{}, ms: stats.NewDist()}
		m[k] = c
	}
	c.n++
	if status != "ok" {
		c.failed[status]++
		return
	}
	c.ms.Add(ms)
}

// fill makes the rows: every cell of any column, resolvers together, in
// the protocol table's order.
func (t *Table) fill(cols []cells) {
	seen := map[Cell]bool{}
	var cells []Cell
	for _, c := range cols {
		for k := range c {
			if !seen[k] {
				seen[k] = true
				cells = append(cells, k)
			}
		}
	}
	slices.SortFunc(cells, func(a, b Cell) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), order.Compare(a.Condition, b.Condition), order.Compare(a.Transport, b.Transport))
	})
	for _, k := range cells {
		row := Row{Cell: k}
		for i, c := range cols {
			x := c[k]
			if x == nil {
				x = &col{failed: map[string]int{}, ms: stats.NewDist()}
			}
			column := Column{N: x.n, Ms: x.ms.Summary(), Failed: x.failed, dist: x.ms}
			if i > 0 {
				column.Versus = stats.CompareDists(row.Columns[0].dist, x.ms)
			}
			row.Columns = append(row.Columns, column)
		}
		t.Rows = append(t.Rows, row)
	}
}

// Count is the samples compared.
func (t *Table) Count() (int, string) {
	n := 0
	for _, r := range t.Rows {
		for _, c := range r.Columns {
			n += c.N
		}
	}
	if t.Kind == Pages {
		return n, "page loads compared"
	}
	return n, "samples compared"
}

// WriteTable writes the comparison as benchstat does: a column per
// source, each later one against the first.
func (t *Table) WriteTable(w io.Writer) error {
	for i, n := range t.Names {
		fmt.Fprintf(w, "%s: %s (%s)\n", columnLetter(i), printable.String(n), t.Wheres[i])
	}
	fmt.Fprintf(w, "%s, ms: medians of %s with their 95 %% intervals; against %s: Mann-Whitney, \"~\" where not significant\n",
		t.Kind.Title, t.timed(), columnLetter(0))
	tw := len(t.Kind.Row)
	for _, r := range t.Rows {
		tw = max(tw, len(printable.String(r.Target)))
	}
	cw := len("cond")
	for _, r := range t.Rows {
		cw = max(cw, len(r.Condition))
	}
	head := fmt.Sprintf("%-*s %-7s %-*s", tw, t.Kind.Row, "transp", cw, "cond")
	for i := range t.Names {
		head += fmt.Sprintf(" %-27s", columnLetter(i)+" ms (answered)")
		if i > 0 {
			head += fmt.Sprintf(" %-28s", "vs "+columnLetter(0))
		}
	}
	fmt.Fprintln(w, strings.TrimRight(head, " "))
	for _, r := range t.Rows {
		line := fmt.Sprintf("%-*s %-7s %-*s", tw, printable.String(r.Target), figure.Label(r.Transport), cw, r.Condition)
		for i, c := range r.Columns {
			line += fmt.Sprintf(" %-27s", c.cell())
			if i > 0 {
				line += fmt.Sprintf(" %-28s", c.Versus.FormatDelta())
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	return nil
}

// timed says which samples a median is over.
func (t *Table) timed() string {
	if t.Kind == Pages {
		return "the loads that loaded"
	}
	return "the answered samples (rcode " + strings.Join(t.OKRcodes, " or ") + ")"
}

// cell is "0.12 [0.07, 0.18] 8/8", failures after.
func (c Column) cell() string {
	s := fmt.Sprintf("%s %s %d/%d", stats.F(c.Ms.Median, 2), c.Ms.CI(2), c.Ms.N, c.N)
	if f := stats.Counts(c.Failed); f != "" {
		s += " (" + f + ")"
	}
	return s
}

// columnLetter names column i as benchstat's old/new do, beyond two by
// letter as spreadsheets do: A to Z, then AA, AB, ... (a campaign's
// rounds compared by --by round run past 26: a year's, every 48 h, is
// 183; 'A'+i named the 27th "[").
func columnLetter(i int) string {
	var b []byte
	for i++; i > 0; i = (i - 1) / 26 {
		b = append(b, byte('A'+(i-1)%26))
	}
	slices.Reverse(b)
	return string(b)
}

// Cells are the comparison's statistics as numbers (report --json): a
// cell per row and column, with the comparison against the first.
func (t *Table) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, r := range t.Rows {
		for i, c := range r.Columns {
			keys := map[string]string{t.Kind.Row: r.Target, "transport": r.Transport, "condition": r.Condition, "column": t.Names[i]}
			cell := experiment.NewCell(t.Kind.ID, keys, t.Kind.Metric, c.N, c.Ms)
			cell.Failed = c.Failed
			if i > 0 {
				cell = cell.Versus(t.Names[0], c.Versus)
			}
			out = append(out, cell)
		}
	}
	return out
}

var table = experiment.Table("compare", `<table id="{{.Kind.ID}}"><tr><th class="l">{{.Kind.Row}}</th><th class="l">transport</th><th class="l">{{if eq .Kind.ID "compare"}}condition{{else}}setting{{end}}</th>
{{range $i, $n := .Names}}<th>{{$n}}<br>median ms</th><th>95 % CI ms</th><th>answered</th>{{if $i}}<th class="l">vs {{index $.Names 0}}</th>{{end}}{{end}}</tr>
{{range .Rows}}<tr><td class="l">{{.Target}}</td><td class="l">{{label .Transport}}</td><td class="l">{{.Condition}}</td>
{{range $i, $c := .Columns}}<td>{{f .Ms.Median}}</td><td>{{ci .Ms}}</td><td>{{.Ms.N}}/{{.N}}{{with failed .Failed}}<br><small>{{.}}</small>{{end}}</td>{{if $i}}<td class="l">{{delta .Versus}}</td>{{end}}{{end}}</tr>
{{end}}</table>`)

// Section is the report's page of the comparison: the table, and the
// CDFs of every column overlaid, a panel per resolver and transport.
func (t *Table) Section(dir string) (*experiment.Section, error) {
	set := &figure.Set{Dir: dir}
	dashes := [][]vg.Length{nil, {vg.Points(5), vg.Points(3)}, {vg.Points(1), vg.Points(2)}, {vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}}
	colours := []figure.Series{{Color: figure.Blue}, {Color: figure.Red}}
	data := figure.Data{Header: []string{t.Kind.Row, "transport", "condition", "column", "value", "cdf"}}
	var panels []*plot.Plot
	for _, r := range t.Rows {
		var ss []*figure.Series
		for i, c := range r.Columns {
			s := &figure.Series{Label: t.Names[i], Color: colours[min(i, 1)].Color, Dashes: dashes[i%len(dashes)], Band: true, Dist: c.dist}
			ss = append(ss, s)
		}
		title := fmt.Sprintf("%s %s %s", printable.String(r.Target), figure.Label(r.Transport), r.Condition)
		p, d, err := figure.CDFPanel(ss, title, t.Kind.Title+" (ms)", false)
		if err != nil {
			return nil, err
		}
		for _, row := range d.Rows {
			data.Rows = append(data.Rows, append([]string{r.Target, r.Transport, r.Condition}, row...))
		}
		if len(panels) > 0 {
			p.Legend = plot.NewLegend()
		}
		panels = append(panels, p)
		if len(panels) == MaxPanels {
			break
		}
	}
	if len(panels) > 0 {
		panels = append(panels, figure.LegendPanel(panels[0]))
		grid := figure.Rows(panels, 4)
		of := "each column's CDF overlaid, with 95 % bands (DKW)"
		if len(t.Rows) > MaxPanels {
			of = fmt.Sprintf("the first %d of %d cells (every one is in the table and the JSON); ", MaxPanels, len(t.Rows)) + of
		}
		if err := set.AddGrid(grid, "cdf-"+t.Kind.ID, "CDF of the "+t.Kind.Title+", column against column", of,
			12*vg.Inch, vg.Length(3.2*float64(len(grid)))*vg.Inch, data); err != nil {
			return nil, err
		}
	}
	intro := fmt.Sprintf("Each column's samples per %s, transport and %s: the median %s of %s with its 95 %% interval, and every column against the first (%s), as benchstat gives them: the relative change of the medians and the Mann-Whitney test, \"~\" where it is not significant.",
		t.Kind.Row, map[bool]string{true: "condition", false: "setting"}[t.Kind == DNS], t.Kind.Title, t.timed(), t.Names[0])
	title := "Run against run"
	if t.Kind == Pages {
		title = "Run against run: page loads"
	}
	return experiment.NewSection(t.Kind.ID, title, template.HTML(template.HTMLEscapeString(intro)), table, t, set)
}

// MaxPanels bounds the panels the figure draws; the table has every
// cell.
const MaxPanels = 24

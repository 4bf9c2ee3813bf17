// Package report renders what a store holds as one self-contained HTML
// page, with every figure also saved as PNG and SVG. It draws nothing of
// its own: it loads each registered experiment's results from the store
// and lays out the sections they render (the DNS exchange in RTTs, page
// loads, head-of-line blocking, amplification, octets by layer), then the
// resolver survey.
package report

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/doxlab/doxlab/experiment"
	_ "github.com/doxlab/doxlab/experiment/all" // every experiment, for Load
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/verify"
)

// Results is one experiment's results, named.
type Results struct {
	Experiment string // as registered: "hol"
	experiment.Results
}

// Input is what a report draws.
type Input struct {
	Results []Results      // per experiment, in the registry's order
	Survey  *verify.Survey // verifications (verify)
}

// Empty reports whether in holds nothing to draw.
func (in Input) Empty() bool {
	for _, r := range in.Results {
		if n, _ := r.Count(); n > 0 {
			return false
		}
	}
	return in.Survey == nil || in.Survey.Empty()
}

// Counts says how much in holds: "9 samples, 0 page loads, ...".
func (in Input) Counts() string {
	var out []string
	for _, r := range in.Results {
		n, unit := r.Count()
		out = append(out, fmt.Sprintf("%d %s", n, unit))
	}
	return strings.Join(out, ", ")
}

// Report is what Render wrote.
type Report struct {
	Dir      string
	HTML     string   // the page
	Figures  []string // PNG and SVG files
	Sections []*experiment.Section
	Survey   string // the survey's tables, as text
}

// Render draws in into dir.
func Render(in Input, dir, title string) (*Report, error) {
	if in.Empty() {
		return nil, fmt.Errorf("no samples to report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Dir: dir, HTML: filepath.Join(dir, "report.html")}
	for _, r := range in.Results {
		if n, _ := r.Count(); n == 0 {
			continue
		}
		s, err := r.Section(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Experiment, err)
		}
		rep.Sections = append(rep.Sections, s)
		rep.Figures = append(rep.Figures, s.Files...)
	}
	if in.Survey != nil && !in.Survey.Empty() {
		var b strings.Builder
		in.Survey.Write(&b)
		rep.Survey = b.String()
	}
	var b bytes.Buffer
	if err := page.Execute(&b, map[string]any{"Title": title, "Sections": rep.Sections, "Survey": rep.Survey}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(rep.HTML, b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

var page = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}h2{margin-top:2em}h3{margin-top:1.5em;font-size:1em}.fig svg{max-width:100%;height:auto}
</style></head><body>
<h1>{{.Title}}</h1>
{{if gt (len .Sections) 1}}<p>{{range $i, $s := .Sections}}{{if $i}} · {{end}}<a href="#{{$s.ID}}">{{$s.Title}}</a>{{end}}{{if .Survey}} · <a href="#survey">Resolver survey</a>{{end}}</p>{{end}}
{{range .Sections}}<h2 id="{{.ID}}">{{.Title}}</h2>
<p>{{.Intro}}</p>
{{.Table}}
{{range .Figures}}<h3 id="{{.Name}}">{{.Heading}}{{if .Of}} — {{.Of}}{{end}}</h3><div class="fig">{{.SVG}}</div>
{{end}}{{end}}
{{if .Survey}}<h2 id="survey">Resolver survey</h2>
<p>From <code>doxlab verify</code>: the PAM paper's DoQ version breakdown and the DoH-cost paper's Tables 1-2.</p>
<pre>{{.Survey}}</pre>{{end}}
</body></html>
`))

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

// Load reads what a report draws from a store alone: the results of every
// registered experiment and the survey, of the runs whose ID starts with
// prefix ("" for all), and the runs themselves.
func Load(ctx context.Context, st *store.Store, prefix string) (Input, []store.Run, error) {
	var in Input
	for _, info := range experiment.Registered() {
		r, err := info.New().Load(ctx, st, prefix)
		if err != nil {
			return in, nil, fmt.Errorf("loading %s: %w", info.Name, err)
		}
		in.Results = append(in.Results, Results{Experiment: info.Name, Results: r})
	}
	var err error
	if in.Survey, err = verify.LoadSurvey(ctx, st, prefix); err != nil {
		return in, nil, err
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return in, nil, err
	}
	runs = slices.DeleteFunc(runs, func(r store.Run) bool { return !strings.HasPrefix(r.ID, prefix) })
	return in, runs, nil
}

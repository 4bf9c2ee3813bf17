// Package report renders what a store holds as one self-contained HTML
// page, with every figure also saved as SVG, PDF and PNG at a paper's
// one- and two-column widths. It draws nothing of its own: it loads each
// registered experiment's results from the store and lays out the
// sections they render (the DNS exchange in RTTs, page
// loads, head-of-line blocking, amplification, octets by layer), then the
// resolver survey.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/doxlab/doxlab/experiment"
	_ "github.com/doxlab/doxlab/experiment/all" // every experiment, for Load
	"github.com/doxlab/doxlab/figure"
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
	Runs    []store.Run    // the runs they come from, for the environment
	Links   []*experiment.LinkCheck
	// Again are the runs measured again after a failed link check: they
	// stay in the store, out of the report.
	Again []store.Supersession
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
	Figures  []string // every figure's files: SVG, PDF and PNG at both widths
	Findings []experiment.Finding
	Sections []*experiment.Section
	Survey   string   // the survey's tables, as text
	measured []string // each section's subject and count: "page loads (84 page loads)"
}

// evidence is what the link checks of one experiment's runs say: a
// check that failed in another experiment's run does not touch its
// findings.
func (in Input) evidence(name string) experiment.Evidence {
	kinds := map[string]string{}
	for _, r := range in.Runs {
		kinds[r.ID] = r.Kind
	}
	var lcs []*experiment.LinkCheck
	for _, lc := range in.Links {
		if k, ok := kinds[lc.Run]; !ok || k == "experiment:"+name {
			lcs = append(lcs, lc) // a check of a run not loaded is kept: unknown is not held
		}
	}
	return experiment.EvidenceOf(lcs)
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
	sections, errs := drawSections(in.Results, dir)
	for i, r := range in.Results {
		if n, _ := r.Count(); n == 0 {
			continue
		}
		ss := sections[i]
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", r.Experiment, errs[i])
		}
		n, unit := r.Count()
		var titles []string
		for _, s := range ss {
			rep.Sections = append(rep.Sections, s)
			rep.Figures = append(rep.Figures, s.Files...)
			titles = append(titles, lowerFirst(s.Title))
		}
		rep.measured = append(rep.measured, fmt.Sprintf("%s (%d %s)", strings.Join(titles, " and "), n, unit))
		if f, ok := r.Results.(experiment.Finder); ok {
			rep.Findings = append(rep.Findings, experiment.Earn(f.Findings(), in.evidence(r.Experiment))...)
		}
	}
	if in.Survey != nil && !in.Survey.Empty() {
		var b strings.Builder
		in.Survey.Write(&b)
		rep.Survey = b.String()
	}
	var b bytes.Buffer
	var failed []*experiment.LinkCheck
	for _, lc := range in.Links {
		if !lc.OK {
			failed = append(failed, lc)
		}
	}
	shared, own := experiment.SharedReasons(rep.Findings)
	rows := make([]findingRow, len(rep.Findings))
	for i, f := range rep.Findings {
		rows[i] = findingRow{Finding: f, Own: strings.Join(own[i], "; ")}
		for _, sh := range shared {
			if slices.Contains(f.Reasons, sh.Reason) {
				rows[i].Marks = append(rows[i].Marks, sh.Mark)
			}
		}
	}
	if err := page.Execute(&b, map[string]any{"Title": title, "Summary": summary(in, rep), "Findings": rows, "Shared": shared, "Env": environment(in.Runs, in.Links), "Sections": rep.Sections, "Survey": rep.Survey,
		"Links": in.Links, "Again": in.Again, "LinksFailed": failed, "MixedMethods": mixedMethods(in.Runs), "MinSamples": experiment.MinSamples, "FontCSS": figure.FontCSS()}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(rep.HTML, b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

// drawSections draws each result's sections into dir, two results at a
// time, as they were loaded: a section's figures are drawn on both cores
// where its set is parallel, but its tables, its statistics and its
// sets that are not (or hold one figure) on one, while the other
// section's could take the other (a first report of ten million samples
// spent 1.7 s of its 3.2 s of CPU drawing). Each result's sections, or
// its error, at its index.
func drawSections(results []Results, dir string) ([][]*experiment.Section, []error) {
	sections := make([][]*experiment.Section, len(results))
	errs := make([]error, len(results))
	two := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, r := range results {
		if n, _ := r.Count(); n == 0 {
			continue
		}
		two <- struct{}{}
		wg.Go(func() {
			defer func() { <-two }()
			if m, ok := r.Results.(experiment.Sectioner); ok {
				sections[i], errs[i] = m.Sections(dir)
				return
			}
			s, err := r.Section(dir)
			sections[i], errs[i] = []*experiment.Section{s}, err
		})
	}
	wg.Wait()
	return sections, errs
}

// findingRow is a finding as the page's table shows it: the marks of
// the shared reasons it is inconclusive for, stated once under the
// table, and its own.
type findingRow struct {
	experiment.Finding
	Marks []string
	Own   string
}

var page = template.Must(template.New("report").Funcs(figure.Funcs).Funcs(template.FuncMap{
	"mbit": func(v float64) float64 { return v / 1e6 },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{{.Title}}</title>
<style>
{{.FontCSS}}
body{font-family:system-ui,sans-serif;margin:0;color:#222;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:1.5em 2em}
nav{position:sticky;top:0;background:#fafafa;border-bottom:1px solid #ddd;padding:.5em 2em;font-size:14px;z-index:1}
nav a{margin-right:1.2em;color:#0072b2;text-decoration:none}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.l,th.l{text-align:left}h2{margin-top:2em;border-bottom:2px solid #222}h3{margin:1.5em 0 .3em;font-size:1em}
.fig svg{width:100%;height:auto}.fig p{margin:.2em 0;font-size:13px}
details{margin:1em 0}summary{cursor:pointer;color:#0072b2}
#findings td{text-align:left}.verdict{font-weight:600;white-space:nowrap}
.holds{color:#009e73}.differs{color:#d55e00}.nodata{color:#777}
.env{font-size:13px;color:#555}.summary{font-size:16px;max-width:60em}.table{overflow-x:auto;margin:1em 0}
.warn{background:#fff3e0;border-left:4px solid #d55e00;padding:.5em 1em}
</style></head><body>
<nav><b>doxlab</b> &nbsp; {{if .Findings}}<a href="#findings">Findings</a>{{end}}{{range .Sections}}<a href="#{{.ID}}">{{.Title}}</a>{{end}}{{if .Survey}}<a href="#survey">Resolver survey</a>{{end}}{{if .Links}}<a href="#links">Links</a>{{end}}</nav>
<main>
<h1>{{.Title}}</h1>
<p class="summary">{{.Summary}}</p>
<p class="env">{{.Env}}</p>
{{if .MixedMethods}}<div class="warn" id="mixed-methods"><b>Runs of two methods</b>: an experiment's method changed between these runs, and the report pools their samples. Report the runs of one method apart, or set them against each other (<code>doxlab report --compare</code>).<ul>
{{range .MixedMethods}}<li>{{.}}</li>
{{end}}</ul></div>{{end}}
{{if .LinksFailed}}<div class="warn" id="links-failed"><b>{{len .LinksFailed}} link check(s) failed</b>: the emulated link of these runs did not hold its profile, so their results may be distorted (<a href="#links">all checks</a>).<ul>
{{range .LinksFailed}}<li>{{.Run}} ({{.Profile}}, {{.When}} the run): {{.Why}}</li>
{{end}}</ul></div>{{end}}
{{if .Findings}}<h2 id="findings">Findings</h2>
<p>Each paper's headline claim, the paper's figures, the same measure from this store, and whether the claim holds here (the test applied is in the last column). A verdict is given only where the data earns one: at least {{.MinSamples}} samples in every cell behind it, a claimed difference significant (Mann-Whitney, p &lt; 0.05), every link check of the runs held, and a claim about time (in round trips or not) measured on an emulated link; otherwise it is <i>inconclusive</i>, with the reason.</p>
<table id="findings"><tr><th class="l">claim</th><th class="l">paper</th><th class="l">here</th><th class="l">verdict</th><th class="l">test</th></tr>
{{range .Findings}}<tr class="finding"><td><a href="#{{.Figure}}">{{.Claim}}</a><br><small>{{.Source}}</small></td><td>{{.Paper}}</td><td>{{.Here}}</td><td class="verdict {{if eq .Verdict "holds"}}holds{{else if eq .Verdict "differs"}}differs{{else}}nodata{{end}}">{{.Verdict}}</td><td><small>{{.Why}}{{if .Reason}}<br><b>inconclusive:</b> {{range .Marks}}{{.}} {{end}}{{.Own}}{{end}}</small></td></tr>
{{end}}</table>
{{with .Shared}}<p id="shared-reasons"><small>{{range .}}<b>{{.Mark}}</b> {{.Reason}} ({{.N}} findings)<br>{{end}}</small></p>{{end}}{{end}}
{{range .Sections}}<section id="{{.ID}}"><h2>{{.Title}}</h2>
<p>{{.Intro}}</p>
{{range .Figures}}<div class="fig" id="{{.Name}}"><h3>{{.Heading}}{{if .Of}} — {{.Of}}{{end}}</h3>{{.SVG}}<p>{{if .CSV}}<a href="{{.CSV}}">data (CSV)</a> · {{end}}for print: two columns (7 in) <a href="{{.Name}}.pdf">PDF</a>, <a href="{{.Name}}.png">PNG</a>; one column (3.5 in) <a href="{{.Name}}-1col.pdf">PDF</a>, <a href="{{.Name}}-1col.png">PNG</a></p></div>
{{end}}<div class="table">
{{.Table}}
</div></section>
{{end}}
{{if .Survey}}<section id="survey"><h2>Resolver survey</h2>
<p>From <code>doxlab verify</code>: the PAM paper's DoQ version breakdown and the DoH-cost paper's Tables 1-2.</p>
<pre>{{.Survey}}</pre></section>{{end}}
{{if .Links}}<section id="links"><h2>Links</h2>
<p>Before and after each run on the testbed, a short check of the client's emulated link (<code>testbed.Check</code>: 100 RTT probes, half a second of traffic each way). A check fails when a direction delivers under 95 % of its rate (less the profile's loss) or the RTT error's p99 exceeds 1 ms. A profile's cross traffic pauses during the checks; the column gives what it delivered while the run measured. A run on the loopback net (<code>--net loopback</code>) has no emulated link: its checks measure nothing and say so.</p>
{{range .Again}}<p>Run <code>{{.Run}}</code> was measured again, as <code>{{.By}}</code>: {{.Why}}. Its samples stay in the store, out of this report (<code>doxlab export --superseded</code> includes them).</p>
{{end}}<details><summary>{{len .Links}} checks</summary>
<table id="link-checks"><tr><th class="l">run</th><th class="l">when</th><th class="l">profile</th><th>RTT ms</th><th>err p50 µs</th><th>err p99 µs</th><th>err max µs</th><th>up Mbit/s</th><th>down Mbit/s</th><th>emulator CPU</th><th>cross traffic Mbit/s ↓/↑</th><th class="l">held</th></tr>
{{range .Links}}<tr><td class="l">{{.Run}}</td><td class="l">{{.When}}</td><td class="l">{{.Profile}}</td>{{if .Net}}<td>–</td><td>–</td><td>–</td><td>–</td><td>–</td><td>–</td><td>–</td><td>–</td><td class="l">{{.Net}}: nothing emulated, nothing checked</td>{{else}}<td>{{printf "%.1f" .RTTMs}}</td><td>{{printf "%.0f" .ErrP50Us}}</td><td>{{printf "%.0f" .ErrP99Us}}</td><td>{{printf "%.0f" .ErrMaxUs}}</td><td>{{if .UpRate}}{{printf "%.1f/%.1f" (mbit .UpAchieved) (mbit .UpRate)}}{{else}}–{{end}}</td><td>{{if .DownRate}}{{printf "%.1f/%.1f" (mbit .DownAchieved) (mbit .DownRate)}}{{else}}–{{end}}</td><td>{{share .EmulatorCPU}}</td><td>{{with .Cross}}{{printf "%.1f/%.1f" .DownMbps .UpMbps}}{{else}}–{{end}}</td><td class="l">{{if .OK}}yes{{else}}<b class="differs">no</b>: {{.Why}}{{end}}</td>{{end}}</tr>
{{end}}</table></details></section>{{end}}
</main></body></html>
`))

// environment says where and with what the runs were measured, and what
// the link checks say (never contradicting the link section).
func environment(runs []store.Run, links []*experiment.LinkCheck) string {
	if len(runs) == 0 {
		return ""
	}
	set := func(f func(store.Run) string) string { return strings.Join(distinct(runs, f), ", ") }
	first, last := runs[0].StartedAt, runs[0].StartedAt
	for _, r := range runs {
		if r.StartedAt.Before(first) {
			first = r.StartedAt
		}
		if r.StartedAt.After(last) {
			last = r.StartedAt
		}
	}
	return fmt.Sprintf("%d runs from %s to %s on %s (kernel %s), doxlab %s, %s%s; %s.", len(runs),
		first.UTC().Format("2006-01-02 15:04"), last.UTC().Format("2006-01-02 15:04 MST"),
		set(func(r store.Run) string { return r.Hostname }), set(func(r store.Run) string { return r.Kernel }),
		set(func(r store.Run) string { return r.DoxlabVersion }), set(func(r store.Run) string { return r.GoVersion }), methodsOf(runs), fidelity(runs, links))
}

// methodVersions counts each experiment's runs by method version (0:
// not recorded), experiments in the runs' order.
func methodVersions(runs []store.Run) (names []string, by map[string]map[int]int) {
	by = map[string]map[int]int{}
	for _, r := range runs {
		name, ok := strings.CutPrefix(r.Kind, "experiment:")
		if !ok {
			continue
		}
		if by[name] == nil {
			names = append(names, name)
			by[name] = map[int]int{}
		}
		by[name][r.Method]++
	}
	return names, by
}

// version spells a method version.
func version(v int) string {
	if v == 0 {
		return "v0 (not recorded)"
	}
	return fmt.Sprintf("v%d", v)
}

// methodsOf names the experiments' method versions for the environment
// line: ", methods: dns-rtt v1, web v1 and v2".
func methodsOf(runs []store.Run) string {
	names, by := methodVersions(runs)
	var out []string
	for _, n := range names {
		var vs []string
		for _, v := range slices.Sorted(maps.Keys(by[n])) {
			vs = append(vs, version(v))
		}
		out = append(out, n+" "+strings.Join(vs, " and "))
	}
	if len(out) == 0 {
		return ""
	}
	return ", methods: " + strings.Join(out, ", ")
}

// mixedMethods says, for each experiment whose runs were measured with
// more than one method version, how many runs each: "web: 3 runs of
// v1, 2 of v2".
func mixedMethods(runs []store.Run) []string {
	names, by := methodVersions(runs)
	var out []string
	for _, n := range names {
		if len(by[n]) < 2 {
			continue
		}
		var parts []string
		for i, v := range slices.Sorted(maps.Keys(by[n])) {
			switch {
			case i > 0:
				parts = append(parts, fmt.Sprintf("%d of %s", by[n][v], version(v)))
			case by[n][v] == 1:
				parts = append(parts, "1 run of "+version(v))
			default:
				parts = append(parts, fmt.Sprintf("%d runs of %s", by[n][v], version(v)))
			}
		}
		out = append(out, n+": "+strings.Join(parts, ", "))
	}
	return out
}

// fidelity says what is known of the links the runs were measured on:
// the link checks where there are any, else whether the runs recorded a
// fidelity check of their own.
func fidelity(runs []store.Run, links []*experiment.LinkCheck) string {
	loopback := 0
	for _, lc := range links {
		if lc.Net == experiment.NetLoopback {
			loopback++
		}
	}
	var on string
	if loopback > 0 {
		on = fmt.Sprintf("%d link checks on the loopback net measured nothing: no link was emulated, and no claim about time rests on those runs", loopback)
		if loopback == len(links) {
			return on
		}
		on = "; " + on
	}
	if n := len(links) - loopback; n > 0 {
		if bad := len(experiment.EvidenceOf(links).FailedChecks); bad > 0 {
			return fmt.Sprintf("%d link checks recorded with the runs, %d FAILED (see Links)", n, bad) + on
		}
		return fmt.Sprintf("%d link checks recorded with the runs, all held", n) + on
	}
	for _, r := range runs {
		var spec struct {
			Fidelity json.RawMessage `json:"fidelity"`
		}
		if json.Unmarshal(r.Spec, &spec) == nil && len(spec.Fidelity) > 0 {
			return "each run records its link's fidelity check"
		}
	}
	return "the link's fidelity was not recorded with these runs (run doxlab testbed check)"
}

// Title names a report after what its runs measured and when: "doxlab:
// 7 experiments on 5 emulated access profiles, 2026-11-26".
func Title(runs []store.Run) string {
	if len(runs) == 0 {
		return "doxlab report"
	}
	exps := distinct(runs, func(r store.Run) string {
		if name, ok := strings.CutPrefix(r.Kind, "experiment:"); ok {
			return name
		}
		return ""
	})
	profiles := distinct(runs, emulated)
	days := distinct(runs, func(r store.Run) string { return r.StartedAt.UTC().Format("2006-01-02") })
	slices.Sort(days)
	what := "DNS measurements"
	switch {
	case len(exps) == 1:
		what = "the " + exps[0] + " experiment"
	case len(exps) > 1:
		what = fmt.Sprintf("%d experiments", len(exps))
	}
	where := "on real networks"
	switch {
	case len(profiles) == 0 && slices.ContainsFunc(runs, onLoopback):
		where = "on the loopback net, nothing emulated"
	case len(profiles) == 1:
		where = "on the " + profiles[0] + " access profile"
	case len(profiles) > 1:
		where = fmt.Sprintf("on %d emulated access profiles", len(profiles))
	}
	when := days[0]
	if len(days) > 1 {
		when += " to " + days[len(days)-1]
	}
	return fmt.Sprintf("doxlab: %s %s, %s", what, where, when)
}

// distinct are the runs' values of f, each once, in order, none empty.
func distinct(runs []store.Run, f func(store.Run) string) []string {
	var out []string
	for _, r := range runs {
		if v := f(r); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// emulated is the access profile a run emulated: none for loopback
// (profile "none", or an experiment's run on the loopback net) or a real
// network.
func emulated(r store.Run) string {
	if r.Profile == "none" || onLoopback(r) {
		return ""
	}
	return r.Profile
}

// onLoopback says r was an experiment's run on the loopback net.
func onLoopback(r store.Run) bool {
	var spec struct {
		Net string `json:"net"`
	}
	return json.Unmarshal(r.Spec, &spec) == nil && spec.Net == experiment.NetLoopback
}

// lowerFirst lowers a title's first letter unless it starts an acronym
// ("DNS exchange" stays).
func lowerFirst(s string) string {
	if len(s) > 1 && strings.ToUpper(s[:2]) == s[:2] {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// summary is the report's opening paragraph: what was measured, where,
// when, and what the findings say.
func summary(in Input, rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This report covers %d runs: %s.", len(in.Runs), strings.Join(rep.measured, "; "))
	profiles := distinct(in.Runs, emulated)
	vantage := slices.ContainsFunc(in.Runs, func(r store.Run) bool { return r.Kind == "campaign" })
	if len(profiles) > 0 {
		fmt.Fprintf(&b, " The testbed emulated the access links %s between network namespaces on one machine;", strings.Join(profiles, ", "))
		fmt.Fprintf(&b, " %s.", fidelity(in.Runs, in.Links))
		if n := len(in.Again); n > 0 {
			what := "1 run was"
			if n > 1 {
				what = fmt.Sprintf("%d runs were", n)
			}
			fmt.Fprintf(&b, " %s measured again after a failed link check (see Links).", what)
		}
	}
	if vantage {
		b.WriteString(" Campaign samples were measured from vantage points on real networks.")
	}
	tally := map[experiment.Verdict]int{}
	for _, f := range rep.Findings {
		tally[f.Verdict]++
	}
	if len(rep.Findings) > 0 {
		verb := func(n int, one, many string) string {
			if n == 1 {
				return "1 " + one
			}
			return fmt.Sprintf("%d %s", n, many)
		}
		fmt.Fprintf(&b, " Of the papers' %d claims checked here, %s, %s and %s (see Findings).", len(rep.Findings),
			verb(tally[experiment.Holds], "holds", "hold"), verb(tally[experiment.Differs], "differs", "differ"),
			verb(tally[experiment.Inconclusive]+tally[experiment.NoData], "is inconclusive or lacks data", "are inconclusive or lack data"))
	}
	return b.String()
}

// FilterLoader is an experiment whose samples name the vantage point
// that measured them, so a filter's vantage point selects among them.
type FilterLoader interface {
	LoadFiltered(ctx context.Context, st *store.Store, f store.Filter) (experiment.Results, error)
}

// Load reads what a report draws from a store alone: the results of every
// registered experiment and the survey, of the runs whose ID starts with
// prefix ("" for all), and the runs themselves.
func Load(ctx context.Context, st *store.Store, prefix string) (Input, []store.Run, error) {
	return LoadFiltered(ctx, st, store.Filter{RunPrefix: prefix})
}

// LoadFiltered is Load of what f selects. With a vantage point, only the
// experiments whose samples name one report anything.
func LoadFiltered(ctx context.Context, st *store.Store, f store.Filter) (Input, []store.Run, error) {
	var in Input
	prefix := f.RunPrefix
	// The experiments load two at a time, each on its own goroutine: at
	// ten million samples the DNS samples' load counts each run's
	// samples (about a second of one core) before it reads their blocks
	// on both, and the page loads load in that second. A failure stops
	// nothing: the first, in the registry's order, is the one said.
	type load struct {
		name string
		e    experiment.Experiment
	}
	var loads []load
	for _, info := range experiment.Registered() {
		e := info.New()
		if _, ok := e.(FilterLoader); !ok && f.Vantage != "" {
			continue // nothing of it was measured from a vantage point
		}
		loads = append(loads, load{info.Name, e})
	}
	results := make([]experiment.Results, len(loads))
	errs := make([]error, len(loads))
	two := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, l := range loads {
		two <- struct{}{}
		wg.Go(func() {
			defer func() { <-two }()
			if fl, ok := l.e.(FilterLoader); ok {
				results[i], errs[i] = fl.LoadFiltered(ctx, st, f)
			} else {
				results[i], errs[i] = l.e.Load(ctx, st, prefix)
			}
		})
	}
	wg.Wait()
	for i, l := range loads {
		if errs[i] != nil {
			return in, nil, fmt.Errorf("loading %s: %w", l.name, errs[i])
		}
		in.Results = append(in.Results, Results{Experiment: l.name, Results: results[i]})
	}
	if f.Vantage == "" {
		var err error
		if in.Survey, err = verify.LoadSurvey(ctx, st, prefix); err != nil {
			return in, nil, err
		}
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return in, nil, err
	}
	if in.Again, err = st.Supersessions(ctx, prefix); err != nil {
		return in, nil, err
	}
	in.Runs = slices.DeleteFunc(runs, func(r store.Run) bool {
		return !strings.HasPrefix(r.ID, prefix) || slices.ContainsFunc(in.Again, func(x store.Supersession) bool { return x.Run == r.ID })
	})
	if in.Links, err = experiment.LoadLinkChecks(ctx, st, experiment.OfExperiment(prefix)); err != nil {
		return in, nil, err
	}
	return in, in.Runs, nil
}

package web

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/stats"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/store"
)

// Loads are the stored page loads of web runs as the analysis reads
// them, and their cells.
type Loads struct {
	n     int
	cells []pages.Cell
	self  pages.FidelitySummary // Chromium against itself
}

// LoadsOf are the loads of points, summarized once: a year's points
// are not held past it.
func LoadsOf(points []pages.Point) Loads {
	return Loads{n: len(points), cells: pages.SummarizePoints(points), self: pages.ChromiumSplitHalfPoints(points)}
}

// LoadsOfSamples are the loads of samples.
func LoadsOfSamples(samples ...*pages.Sample) Loads { return LoadsOf(pages.Points(samples)) }

// Load reads the page loads of the runs whose IDs start with prefix.
func (c *Web) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	return c.LoadFiltered(ctx, st, store.Filter{RunPrefix: prefix})
}

// LoadFiltered reads the web runs' page loads and the campaigns' that f
// selects: with a vantage point, only the campaigns'.
func (c *Web) LoadFiltered(ctx context.Context, st *store.Store, f store.Filter) (experiment.Results, error) {
	var r Results
	var err error
	if f.Vantage == "" {
		var ps []pages.Point
		ps, err = readLab(ctx, st, f)
		r.Lab = LoadsOf(ps)
	}
	if err == nil {
		r.Wild, err = readWild(ctx, st, f)
	}
	return r, err
}

// Results are the web experiment's page loads, on the testbed (Lab),
// and the campaigns' in the wild (Wild): a section each in the report.
type Results struct {
	Lab  Loads
	Wild Wild
}

// Count is the number of page loads of both.
func (r Results) Count() (int, string) { return r.Lab.Len() + len(r.Wild), "page loads" }

// WriteTable writes each's table.
func (r Results) WriteTable(w io.Writer) error {
	if r.Lab.Len() > 0 || len(r.Wild) == 0 { // an empty store still gets the header
		if err := r.Lab.WriteTable(w); err != nil {
			return err
		}
	}
	if len(r.Wild) > 0 {
		if r.Lab.Len() > 0 {
			fmt.Fprintln(w)
		}
		return r.Wild.WriteTable(w)
	}
	return nil
}

// Section is the first of Sections.
func (r Results) Section(dir string) (*experiment.Section, error) {
	ss, err := r.Sections(dir)
	if err != nil || len(ss) == 0 {
		return nil, err
	}
	return ss[0], nil
}

// Sections are the testbed's section and the campaigns', each where it
// has loads.
func (r Results) Sections(dir string) ([]*experiment.Section, error) {
	var out []*experiment.Section
	if r.Lab.Len() > 0 {
		s, err := r.Lab.Section(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(r.Wild) > 0 {
		s, err := r.Wild.Section(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Cells are each's.
func (r Results) Cells() []experiment.Cell {
	return append(r.Lab.Cells(), r.Wild.Cells()...)
}

// Findings are each's.
func (r Results) Findings() []experiment.Finding {
	var out []experiment.Finding
	if r.Lab.Len() > 0 {
		out = append(out, r.Lab.Findings()...)
	}
	if len(r.Wild) > 0 {
		out = append(out, r.Wild.Findings()...)
	}
	return out
}

// Count is the number of page loads.
func (ls Loads) Count() (int, string) { return ls.Len(), "page loads" }

// Len is the number of page loads.
func (ls Loads) Len() int { return ls.n }

// WriteTable writes medians per cell, relative to DoUDP + H3 1-RTT, and
// how doxlab's page loader compares with Chromium where both loaded.
func (ls Loads) WriteTable(w io.Writer) error {
	cells := ls.cells
	mw := len("dns-mode") + 1
	for _, x := range cells {
		mw = max(mw, len(modeLabel(x)))
	}
	fmt.Fprintln(w, "medians in ms with their 95 % intervals; Δ against DoUDP + H3 1-RTT (each engine against its own), \"~\" where Mann-Whitney finds no difference (p ≥ 0.05)")
	fmt.Fprintf(w, "%-8s %-*s %-10s %-8s %-5s %-5s %-4s %6s %8s %-17s %-24s %-21s %-26s %-26s %6s %6s %6s\n", "engine", mw, "dns-mode", "profile", "page", "dns", "stub", "h3", "ok", "PLT", "PLT 95% CI", "FCP", "DNS", "ΔPLT", "ΔFCP", "0-RTT", "resum", "token")
	for _, x := range cells {
		if _, err := fmt.Fprintf(w, "%-8s %-*s %-10s %-8s %-5s %-5s %-4s %3d/%-2d %8s %-17s %-24s %-21s %-26s %-26s %5.0f%% %5.0f%% %5.0f%%\n", x.Engine, mw, modeLabel(x), x.Profile, x.Page, x.Transport, x.StubState, x.H3,
			x.OK, x.N, stats.F(x.PLT, 1), x.PLTStat.CI(1), x.FCPStat.Cell(1), x.DNSStat.Cell(1), x.DeltaPLT.FormatDelta(), x.DeltaFCP.FormatDelta(), 100*x.Real0RTT, 100*x.Resumed, 100*x.Token()); err != nil {
			return err
		}
	}
	if multi := multiOrigin(cells); len(multi) > 0 {
		fmt.Fprintln(w, "\npages over several origins: medians per load with their 95 % intervals (lookups a request waited for, and the DNS time on requests' paths, from resource timing)")
		sw := 0 // the setup column, where a setup is not the papers'
		for _, x := range multi {
			if x.Setup != "" {
				sw = max(sw, len("setup "), len(x.Setup)+1)
			}
		}
		setup := func(label string) string {
			if sw == 0 {
				return ""
			}
			return fmt.Sprintf("%-*s", sw, cmp.Or(label, "-"))
		}
		fmt.Fprintf(w, "%s%-8s %-10s %-8s %-5s %-5s %-4s %-14s %-14s %-20s %-20s %-14s %6s %-14s %-14s %s\n", setup("setup"), "engine", "profile", "page", "dns", "stub", "h3", "lookups", "blocking", "DNS path ms", "DNS all ms", "conns", "0-RTT", "no lookup", "not h3", "ΔPLT")
		for _, x := range multi {
			fmt.Fprintf(w, "%s%-8s %-10s %-8s %-5s %-5s %-4s %-14s %-14s %-20s %-20s %-14s %5.0f%% %-14s %-14s %s\n", setup(x.Setup), x.Engine, x.Profile, x.Page, x.Transport, x.StubState, x.H3,
				x.LookupsStat.Cell(0), x.LookupsBlockingStat.Cell(0), x.DNSBlockingStat.Cell(1), x.DNSTotalStat.Cell(1), x.ConnsStat.Cell(0), 100*x.Conns0RTT, x.NoLookupStat.Cell(0), x.NotH3Stat.Cell(0), x.DeltaPLT.FormatDelta())
		}
	}
	f := pages.CompareEngines(cells)
	if len(f.Cells) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\ndoxlab's page loader against Chromium: median PLT per cell")
	fmt.Fprintf(w, "%-10s %-8s %-5s %-5s %-4s %9s %9s %8s %9s %8s  %s\n", "profile", "page", "dns", "stub", "h3", "chromium", "doxlab", "error", "unmatched", "chr IQR", "engines apart? (Mann-Whitney)")
	for _, c := range f.Cells {
		raw := ""
		if c.Matched {
			raw = fmt.Sprintf("%+8.1f%%", c.RawErrPct)
		}
		fmt.Fprintf(w, "%-10s %-8s %-5s %-5s %-4s %9.1f %9.1f %+7.1f%% %9s %7.1f%%  %s\n", c.Profile, c.Page, c.Transport, c.StubState, c.H3, c.Chromium, c.Doxlab, c.ErrPct, raw, c.ChromiumIQRPct(), c.Test().Apart())
	}
	_, err := fmt.Fprintf(w, "%d cells: mean absolute error %.1f %%, largest %.1f %%, %d within 5 %%, %d within 10 %%; configurations ranked alike in %d of %d (page, profile) groups\n",
		len(f.Cells), f.MAPE, f.MaxAbs, f.CellsWithin5, f.CellsWithin10, f.SameRanking, f.Groups)
	if f.Matched > 0 {
		fmt.Fprintf(w, "%d cells token-matched (loads with and without a NEW_TOKEN token weighted alike for both engines, or the kind both had compared); the plain medians' mean absolute error is %.1f %%\n", f.Matched, f.RawMAPE)
	}
	fmt.Fprintf(w, "configurations told apart (Mann-Whitney, p < %.2f) ordered alike: where either engine's loads tell them apart in %d of %d groups, where Chromium's do in %d\n", pages.ApartP, f.SameRankingApart, f.Groups, f.SameRankingChromiumApart)
	if self := ls.self; len(self.Cells) > 0 {
		fmt.Fprintf(w, "Chromium against itself (per cell, its even repetitions against its odd ones): mean absolute error %.1f %%, largest %.1f %%, %d of %d cells within 10 %%; ranked alike in %d of %d groups\n",
			self.MAPE, self.MaxAbs, self.CellsWithin10, len(self.Cells), self.SameRanking, self.Groups)
	}
	for _, c := range f.Conflicts {
		fmt.Fprintf(w, "  ordered differently: %s\n", c)
	}
	for _, d := range f.Disagreements {
		fmt.Fprintf(w, "  ranked differently: %s\n", d)
	}
	return err
}

var table = experiment.Table("web", `<table id="web-cells"><tr><th class="l">engine</th><th class="l">dns mode</th><th class="l">stub</th><th class="l">profile</th><th class="l">page</th><th class="l">DNS</th><th class="l">H3</th><th>ok/n</th>
<th>PLT ms</th><th>95 % CI</th><th>FCP ms</th><th>DNS ms</th><th>ΔPLT</th><th>ΔFCP</th><th>0-RTT</th><th>resumed</th><th>token</th></tr>
{{range .Cells}}<tr><td class="l">{{.Engine}}</td><td class="l">{{.DNSMode}}{{with .Setup}} {{.}}{{end}}</td><td class="l">{{.StubState}}</td><td class="l">{{.Profile}}</td><td class="l">{{.Page}}</td><td class="l">{{.Transport}}</td><td class="l">{{.H3}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{ms .PLT}}</td><td>{{ci1 .PLTStat}}</td><td>{{mci1 .FCPStat}}</td><td>{{mci1 .DNSStat}}</td><td>{{delta .DeltaPLT}}</td><td>{{delta .DeltaFCP}}</td><td>{{share .Real0RTT}}</td><td>{{share .Resumed}}</td><td>{{share .Token}}</td></tr>
{{end}}</table>
{{with .Multi}}<h3>Pages over several origins</h3>
<p>Medians per load: the page's host names the stub resolved, those a request had to wait for (its lookup wait in resource timing was not zero), the sum of those waits (DNS time on requests' paths) beside the stub's time per name summed, and the web connections the servers saw; the share of those connections that used 0-RTT; the origins requested with no lookup reaching the stub (the browser's cache, or a pooled connection), and those not wholly over HTTP/3. Each load's record lists these per origin.</p>
<table id="web-origins"><tr><th class="l">setup</th><th class="l">engine</th><th class="l">stub</th><th class="l">profile</th><th class="l">page</th><th class="l">DNS</th><th class="l">H3</th><th>lookups</th><th>blocking a request</th><th>DNS on path ms</th><th>DNS in all ms</th><th>connections</th><th>0-RTT</th><th>no lookup</th><th>not h3</th><th>ΔPLT</th></tr>
{{range .}}<tr><td class="l">{{or .Setup "–"}}</td><td class="l">{{.Engine}}</td><td class="l">{{.StubState}}</td><td class="l">{{.Profile}}</td><td class="l">{{.Page}}</td><td class="l">{{.Transport}}</td><td class="l">{{.H3}}</td><td>{{mci0 .LookupsStat}}</td><td>{{mci0 .LookupsBlockingStat}}</td><td>{{mci1 .DNSBlockingStat}}</td><td>{{mci1 .DNSTotalStat}}</td><td>{{mci0 .ConnsStat}}</td><td>{{share .Conns0RTT}}</td><td>{{mci0 .NoLookupStat}}</td><td>{{mci0 .NotH3Stat}}</td><td>{{delta .DeltaPLT}}</td></tr>
{{end}}</table>{{end}}
{{with .Fidelity}}{{if .Cells}}<h3>doxlab's page loader against Chromium</h3>
<p>{{len .Cells}} cells: mean absolute error {{printf "%.1f" .MAPE}} %, largest {{printf "%.1f" .MaxAbs}} %, {{.CellsWithin5}} within 5 %, {{.CellsWithin10}} within 10 %; configurations ranked alike in {{.SameRanking}} of {{.Groups}} (page, profile) groups, and those either engine's own loads tell apart (Mann-Whitney, p &lt; {{printf "%.2f" .ApartP}}) ordered alike in {{.SameRankingApart}}, those Chromium's loads tell apart in {{.SameRankingChromiumApart}} (the loader's loads are steadier, so it tells apart configurations whose order in the browser's loads is noise). Lighthouse's simulated throttling misses by 20-34 % (MAPE). "Chromium IQR" is the interquartile range of the browser's loads in the cell, in percent of their median: its own spread, to read the error against.{{if .Matched}} In {{.Matched}} cells some loads presented a QUIC NEW_TOKEN token and some did not, a coin flip for both engines (the server shuffles its frames, and a token that arrives before its connection's ticket is lost); there each engine's PLT weights its medians with and without a token alike, or, where one engine's loads were all of one kind, is its median of the kind both engines had; "unmatched" is the error of the plain medians (mean {{printf "%.1f" .RawMAPE}} %).{{end}}{{with $.Self}}{{if .Cells}} Chromium against itself, in each cell its even repetitions against its odd ones, minutes apart: mean absolute error {{printf "%.1f" .MAPE}} %, largest {{printf "%.1f" .MaxAbs}} %, {{.CellsWithin10}} of {{len .Cells}} cells within 10 %, ranked alike in {{.SameRanking}} of {{.Groups}} groups: the agreement the browser's own spread allows.{{end}}{{end}}</p>
<table id="web-fidelity"><tr><th class="l">profile</th><th class="l">page</th><th class="l">DNS</th><th class="l">stub</th><th class="l">H3</th><th>Chromium PLT ms</th><th>doxlab PLT ms</th><th>error</th><th>unmatched</th><th>Chromium IQR</th><th>engines apart?</th></tr>
{{range .Cells}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Page}}</td><td class="l">{{.Transport}}</td><td class="l">{{.StubState}}</td><td class="l">{{.H3}}</td><td>{{ms .Chromium}}</td><td>{{ms .Doxlab}}</td><td>{{pct .ErrPct}}</td><td>{{if .Matched}}{{pct .RawErrPct}}{{end}}</td><td>{{printf "%.1f %%" .ChromiumIQRPct}}</td><td>{{.Test.Apart}}</td></tr>
{{end}}</table>{{end}}{{end}}`)

// Section is the report's part: the cells, the cross-layer paper's
// Fig. 8-12 (and the IMC 2022 slides'): page load times relative to the
// DoUDP + H3 1-RTT baseline, drawn from Chromium's loads; and, where
// doxlab's page loader loaded the same cells, its error against Chromium.
func (ls Loads) Section(dir string) (*experiment.Section, error) {
	cells := ls.cells
	set := &figure.Set{Dir: dir, Parallel: true} // each figure its own plots
	browserCells := slices.DeleteFunc(slices.Clone(cells), func(c pages.Cell) bool { return c.Engine != pages.EngineChromium })
	if len(browserCells) == 0 {
		browserCells = cells // the page loader alone
	}
	if err := pages.Figures(browserCells, set); err != nil {
		return nil, err
	}
	if err := lookupsFigure(browserCells, set); err != nil {
		return nil, err
	}
	return experiment.NewSection("web", "Page loads over HTTP/3",
		"Medians per cell; PLT is loadEventEnd (plus the DNS time in decoupled mode), DNS the stub's time for the page's lookups. Δ is the median's change over DoUDP + H3 1-RTT in the same profile, page, stub state and DNS mode (the IMC 2022 slides' FCP and PLT relative to DoUDP). 0-RTT and resumed are the shares of loads whose HTTP/3 connection the server saw use them; token, of those it saw present a NEW_TOKEN token (without one, a resumed connection's 0-RTT answer is held to three times what the client sent until the handshake completes). The engine <i>doxlab</i> is doxlab's page loader replaying each page's graph, chosen among Chromium's measured loads of it on the profile (its PLT is the replay's last resource plus the captured onload gap; it paints nothing); the figures are Chromium's loads.",
		table, map[string]any{"Cells": cells, "Multi": multiOrigin(cells), "Fidelity": pages.CompareEngines(cells), "Self": ls.self}, set)
}

// modeLabel is a cell's DNS mode with its setup, where not the papers'.
func modeLabel(c pages.Cell) string {
	if c.Setup == "" {
		return c.DNSMode
	}
	return c.DNSMode + " " + c.Setup
}

// multiOrigin are the cells of pages with several origins.
func multiOrigin(cells []pages.Cell) []pages.Cell {
	return slices.DeleteFunc(slices.Clone(cells), func(c pages.Cell) bool { return !c.MultiOrigin() })
}

// Findings checks the cross-layer paper's Fig. 8 claims: DoH + H3 1-RTT
// inflates page loads most, and DoQ with an H3 0-RTT handshake (the
// paper's emulated coalescing) inflates them least, per (page, profile)
// tuple of every DNS mode and stub state.
func (ls Loads) Findings() []experiment.Finding {
	type tuple struct{ mode, state, profile, page string }
	rel := map[tuple]map[string]float64{}
	ok := map[tuple]map[string]int{} // loads behind each median
	var tuples []tuple
	for _, c := range ls.cells {
		if len(c.RelPLTs) == 0 || c.OK == 0 || c.Engine != pages.EngineChromium || c.Setup != "" { // the papers' claims are the browser's, in their setup
			continue
		}
		k := tuple{c.DNSMode, c.StubState, c.Profile, c.Page}
		if rel[k] == nil {
			rel[k], ok[k] = map[string]float64{}, map[string]int{}
			tuples = append(tuples, k)
		}
		rel[k][c.Transport+"/"+c.H3] = c.RelPLT
		ok[k][c.Transport+"/"+c.H3] = c.OK
	}
	var n, dohWorst, doqBest int
	least := 0 // the fewest loads in a cell behind the verdicts
	worst, worstAt := math.Inf(-1), ""
	for _, k := range tuples {
		doh, ok1 := rel[k]["doh2/1rtt"]
		doq1, ok2 := rel[k]["doq/1rtt"]
		doq0, ok3 := rel[k]["doq/0rtt"]
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		n++
		m := min(ok[k]["doh2/1rtt"], ok[k]["doq/1rtt"], ok[k]["doq/0rtt"], ok[k]["udp/1rtt"])
		if n == 1 || m < least {
			least = m
		}
		if doh >= doq1 && doh >= doq0 {
			dohWorst++
		}
		if doq0 <= doq1 && doq0 <= doh {
			doqBest++
		}
		if doh > worst {
			worst, worstAt = doh, k.page+", "+k.profile
		}
	}
	share := func(m int) experiment.Verdict {
		if n == 0 {
			return experiment.NoData
		}
		return experiment.Within(float64(m)/float64(n), 0.8, 1)
	}
	here := func(m int, what string) string {
		if n == 0 {
			return "no (page, profile) with DoUDP, DoH/2 and DoQ loads over H3 1-RTT and DoQ over 0-RTT"
		}
		return fmt.Sprintf("%s in %d of %d (page, profile) tuples", what, m, n)
	}
	worstHere := here(dohWorst, "highest")
	if n > 0 {
		worstHere += fmt.Sprintf("; worst %s (%s)", figure.Pct(worst), worstAt)
	}
	return append([]experiment.Finding{
		{
			Claim:   "DoH + H3 1-RTT inflates page loads more than DoQ, with or without H3 0-RTT",
			Source:  "cross-layer paper §IV-C, Fig. 8",
			Paper:   "highest median PLT increase over DoUDP + H3 1-RTT in every page and profile; worst +53.7 % (example, 4G medium)",
			Here:    worstHere,
			Why:     "holds when DoH/2 is highest in at least 80 % of tuples",
			Figure:  "web",
			Verdict: share(dohWorst),
			N:       least, Timed: true,
		},
		{
			Claim:   "DoQ + H3 0-RTT takes back most of encryption's cost",
			Source:  "cross-layer paper §IV-C, Fig. 8-9",
			Paper:   "the lowest PLT increase of the encrypted setups (emulated coalescing: a DoQ lookup added to an H3 0-RTT load)",
			Here:    here(doqBest, "lowest") + " (DNS in the browser's path through a stub; real coalescing is not measured here)",
			Why:     "holds when DoQ + H3 0-RTT is lowest in at least 80 % of tuples",
			Figure:  "web",
			Verdict: share(doqBest),
			N:       least, Timed: true,
		},
	}, append(multiOriginFindings(ls.cells), originFindings(ls.cells)...)...)
}

// originFindings check what ORIGIN frames (RFC 9412) spare Chromium on a
// many-origin page served from one CDN edge on one certificate: the
// lookups of the announced origins, against the same page there without
// frames. Nil without loads on one CDN.
func originFindings(cells []pages.Cell) []experiment.Finding {
	type twin struct{ profile, page, transport, h3, stub string }
	without := map[twin]pages.Cell{}
	var with []pages.Cell
	for _, c := range cells {
		if c.Engine != pages.EngineChromium || c.OK == 0 || !c.MultiOrigin() {
			continue
		}
		switch c.Setup {
		case pages.CDNPlacement.Name + "+origins":
			with = append(with, c)
		case pages.CDNPlacement.Name:
			without[twin{c.Profile, c.Page, c.Transport, c.H3, c.StubState}] = c
		}
	}
	if len(with) == 0 {
		return nil
	}
	f := experiment.Finding{
		Claim:  "ORIGIN frames spare Chromium the lookups of a many-origin page on one CDN",
		Source: "RFC 9412; issue: Chromium's HTTP/3 ORIGIN",
		Paper:  "not measured by the papers; an independent check (Chromium 156, a four-origin page) saw no lookup for the announced hosts, four without the frame",
		Why:    "holds when, in every many-origin cell on one CDN with ORIGIN frames, Chromium loads at least 80 % of the origins it touches with no lookup, and makes fewer lookups than the same page there without frames, where it was loaded",
		Figure: "web",
	}
	ok, least := 0, math.MaxInt
	var here []string
	for _, c := range with {
		least = min(least, c.OK)
		origins := c.Lookups + c.NoLookup
		spared := c.NoLookup / origins
		line := fmt.Sprintf("%s %s %s %s: %.0f of %.0f origins with no lookup (%s), %.0f connections, PLT %s ms", c.Page, c.Profile, c.Transport, c.H3,
			c.NoLookup, origins, figure.Share(spared), c.Conns, stats.F(c.PLT, 0))
		held := spared >= 0.8
		if w, found := without[twin{c.Profile, c.Page, c.Transport, c.H3, c.StubState}]; found {
			least = min(least, w.OK)
			line += fmt.Sprintf("; without frames %.0f lookups, %.0f connections, PLT %s ms (with frames %s)", w.Lookups, w.Conns, stats.F(w.PLT, 0),
				stats.Compare(w.PLTs, c.PLTs).FormatDelta())
			held = held && c.Lookups < w.Lookups
		}
		if held {
			ok++
		}
		here = append(here, line)
	}
	f.Here = strings.Join(here, "; ")
	f.Verdict = experiment.Within(float64(ok), float64(len(with)), float64(len(with)))
	f.N = least
	return []experiment.Finding{f}
}

// multiOriginFindings check the DoH-cost paper's claims on pages with
// many origins: half the web's pages need 20 lookups or more (Fig. 1),
// and DoH changes their load times little (Fig. 6: Firefox with a
// persistent DoH connection, the Alexa top 1,000).
func multiOriginFindings(cells []pages.Cell) []experiment.Finding {
	var multi []pages.Cell
	for _, c := range cells {
		if c.Engine == pages.EngineChromium && c.OK > 0 && c.MultiOrigin() && c.Setup == "" {
			multi = append(multi, c)
		}
	}
	if len(multi) == 0 {
		return nil
	}
	// Lookups: each page's median over its loads, then the median page.
	perPage := map[string][]float64{}
	for _, c := range multi {
		perPage[c.Page] = append(perPage[c.Page], c.LookupCounts...)
	}
	fewestLoads := math.MaxInt
	for _, v := range perPage {
		fewestLoads = min(fewestLoads, len(v))
	}
	var medians []float64
	var each []string
	for _, pg := range slices.SortedFunc(maps.Keys(perPage), order.Compare) {
		m := stats.Median(perPage[pg])
		medians = append(medians, m)
		each = append(each, fmt.Sprintf("%s %.0f", pg, m))
	}
	median := stats.Median(medians)
	out := []experiment.Finding{{
		Claim:   "A typical page needs about 20 DNS lookups",
		Source:  "DoH-cost paper §1, Fig. 1",
		Paper:   "about half the Alexa top 100k pages need 20 DNS queries or more (Firefox, caches emptied)",
		Here:    fmt.Sprintf("the median page loaded makes %.0f lookups in Chromium (%s)", median, strings.Join(each, ", ")),
		Why:     "holds when the median of the pages loaded makes 20 or more; the corpus' median page is o20",
		Figure:  "web-lookups",
		Verdict: experiment.Within(median, paperLookups, math.Inf(1)),
		N:       fewestLoads,
	}}
	// DoH's cost with a warm connection, on pages of 20 origins or more.
	var rel []float64
	var where []string
	var tests []stats.Comparison
	least := math.MaxInt
	for _, c := range multi {
		if c.Transport == "doh2" && c.H3 == "1rtt" && c.StubState == "warm" && c.Lookups >= paperLookups && !math.IsNaN(c.RelPLT) {
			least = min(least, c.OK, c.DeltaPLT.Base.N)
			rel = append(rel, c.RelPLT)
			tests = append(tests, c.DeltaPLT)
			where = append(where, fmt.Sprintf("%s %s %s", c.Page, c.Profile, figure.Pct(c.RelPLT)))
		}
	}
	f := experiment.Finding{
		Claim:  "DoH changes the load time of pages with many origins little",
		Source: "DoH-cost paper §5, Fig. 6",
		Paper:  "page load times (onload) via DoH and via UDP DNS are comparable for the Alexa top 1,000 (Firefox, persistent DoH connection)",
		Why:    "holds when DoH/2 with a warm stub connection changes the median PLT of pages with 20 or more lookups by at most 5 % in every profile",
		Figure: "web",
		Timed:  true,
	}
	if len(rel) == 0 {
		f.Here, f.Verdict = "no loads of a page with 20 or more lookups over DoH/2 with a warm stub and H3 1-RTT", experiment.NoData
	} else {
		worst, at := 0.0, 0
		for i, r := range rel {
			if math.Abs(r) >= worst {
				worst, at = math.Abs(r), i
			}
		}
		f.Here = "median PLT change over DoUDP: " + strings.Join(where, "; ")
		f.Verdict = experiment.Within(worst, 0, 5)
		f.N = least
		if f.Verdict == experiment.Differs {
			// A claim of little change differs only where the change
			// beyond 5 % is one Mann-Whitney tells from noise.
			f.Test = &tests[at]
			f.Why += "; differs when the largest change is also significant"
		}
	}
	return append(out, f)
}

// paperLookups is the DoH-cost paper's Fig. 1 as its text states it:
// about half the Alexa top 100k pages needed 20 DNS queries or more.
const paperLookups = 20

// lookupsFigure is the DoH-cost paper's Fig. 1 for the corpus: the CDF of
// the DNS lookups per page load in Chromium (the names the stub resolved
// for the page) over every load, beside the paper's median.
func lookupsFigure(cells []pages.Cell, set *figure.Set) error {
	if !slices.ContainsFunc(cells, pages.Cell.MultiOrigin) {
		return nil
	}
	var all []float64
	var names []string
	for _, c := range cells {
		if c.Engine != pages.EngineChromium || len(c.LookupCounts) == 0 {
			continue
		}
		if !slices.Contains(names, c.Page) {
			names = append(names, c.Page)
		}
		all = append(all, c.LookupCounts...)
	}
	slices.SortFunc(names, order.Compare)
	ss := []*figure.Series{{Label: "every load of " + strings.Join(names, ", "), Values: all}}
	p, data, err := figure.CDF(ss, "DNS lookups per page load (Chromium)", "lookups per load", false)
	if err != nil {
		return err
	}
	ref, err := plotter.NewScatter(plotter.XYs{{X: paperLookups, Y: 0.5}})
	if err != nil {
		return err
	}
	ref.GlyphStyle.Shape = draw.CrossGlyph{}
	ref.GlyphStyle.Radius = vg.Points(5)
	p.Add(ref)
	p.Legend.Add("DoH-cost paper, Fig. 1: half the Alexa top 100k need ≥ 20", ref)
	p.X.Max = max(p.X.Max, paperLookups*1.5)
	data.Add("doh-cost paper fig. 1 (median, from its text)", paperLookups, 0.5)
	return set.Add(p, "web-lookups", "Lookups per page", "the DoH-cost paper's Fig. 1 for the corpus", figure.CDFWidth, figure.CDFHeight, data)
}

// Cells are the cells' statistics as numbers: PLT and FCP each against
// DoUDP + H3 1-RTT, the page's DNS time, and the multi-origin counts.
func (ls Loads) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, x := range ls.cells {
		keys := map[string]string{"engine": x.Engine, "dns_mode": x.DNSMode, "stub": x.StubState, "profile": x.Profile, "page": x.Page, "transport": x.Transport, "h3": x.H3}
		if x.Setup != "" {
			keys["setup"] = x.Setup
		}
		out = append(out,
			experiment.NewCell("web", keys, "plt_ms", x.N, x.PLTStat).Versus("udp/1rtt", x.DeltaPLT),
			experiment.NewCell("web", keys, "fcp_ms", x.N, x.FCPStat).Versus("udp/1rtt", x.DeltaFCP),
			experiment.NewCell("web", keys, "dns_ms", x.N, x.DNSStat))
		if x.MultiOrigin() {
			for _, m := range []struct {
				name string
				s    stats.Summary
			}{{"lookups", x.LookupsStat}, {"lookups_blocking", x.LookupsBlockingStat}, {"dns_blocking_ms", x.DNSBlockingStat}, {"dns_total_ms", x.DNSTotalStat},
				{"conns", x.ConnsStat}, {"origins_no_lookup", x.NoLookupStat}, {"origins_not_h3", x.NotH3Stat}} {
				out = append(out, experiment.NewCell("web-origins", keys, m.name, x.N, m.s))
			}
		}
	}
	return out
}

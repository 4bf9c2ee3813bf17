package report_test

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/dnsrtt"
	"github.com/doxlab/doxlab/figure"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/reportcheck"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

func fixture() []store.Row {
	f := func(v float64) *float64 { return &v }
	var rows []store.Row
	for _, p := range []string{"fiber", "dsl"} {
		for i := range 20 {
			x := float64(i) / 100
			rows = append(rows,
				store.Row{RunID: "e1-" + p, Profile: p, Transport: "udp", Condition: "fresh", Status: "ok", TotalMs: f(15 + x), TotalRTT: f(1 + x/10), ResolveRTT: f(1 + x/10), HandshakeRTT: f(0)},
				store.Row{RunID: "e1-" + p, Profile: p, Transport: "doq", Condition: "fresh", Status: "ok", TotalMs: f(33 + x), TotalRTT: f(2.2 + x), ResolveRTT: f(1.05), HandshakeRTT: f(1.1 + x),
					BytesSent: 2400, BytesReceived: 4000, PacketsSent: 2, PacketsReceived: 4},
				store.Row{RunID: "e1-" + p, Profile: p, Transport: "doq", Condition: "0rtt", Status: "ok", TotalMs: f(16 + x), TotalRTT: f(1.1 + x), ResolveRTT: f(1.1), HandshakeRTT: f(1.2)},
			)
		}
		rows = append(rows, store.Row{RunID: "e1-" + p, Profile: p, Transport: "dot", Condition: "fresh", Status: "timeout"})
	}
	return rows
}

// samples are the fixture with the built-in profiles its runs name, as
// report.Load reads them from the runs.
func samples(t *testing.T) report.Input {
	profiles := map[string]testbed.Profile{}
	for _, name := range []string{"fiber", "dsl"} {
		p, err := testbed.LookupProfile(name)
		require.NoError(t, err)
		profiles["e1-"+name] = p
	}
	return report.Input{Results: []report.Results{{Experiment: "dns-rtt", Results: dnsrtt.NewSamples(fixture(), profiles)}}}
}

func TestRender(t *testing.T) {
	dir := t.TempDir()
	in := samples(t)
	rep, err := report.Render(in, dir, "doxlab report: test")
	require.NoError(t, err)
	require.Len(t, rep.Figures, 3*len(figure.Suffixes), "3 metrics, each one grid of (all, fiber, dsl), as SVG, PDF and PNG at two widths")
	for _, f := range rep.Figures {
		require.FileExists(t, f)
		if strings.HasSuffix(f, ".png") {
			fh, err := os.Open(f)
			require.NoError(t, err)
			img, err := png.Decode(fh)
			fh.Close()
			require.NoError(t, err, f)
			require.Greater(t, img.Bounds().Dx(), 400)
		}
	}
	html, err := os.ReadFile(rep.HTML)
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(html), "<svg"), "every figure inline: the page stands alone")
	// Each figure's data is beside it and linked.
	data, err := os.ReadFile(filepath.Join(dir, "cdf-total.csv"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(data), "profile,series,value,cdf\n"))
	require.Contains(t, string(data), "fiber,DoQ 0rtt,")
	require.Contains(t, string(html), `href="cdf-total.csv"`)
	// The findings open the page: DoUDP 1.0 RTT holds; DoQ and DoH cannot
	// be compared without DoH samples.
	require.Less(t, strings.Index(string(html), `id="findings"`), strings.Index(string(html), `id="dns"`))
	require.Len(t, rep.Findings, 2)
	require.Equal(t, experiment.Holds, rep.Findings[0].Verdict, rep.Findings[0].Here)
	require.Equal(t, experiment.NoData, rep.Findings[1].Verdict, rep.Findings[1].Here)
	require.NotContains(t, string(html), "src=", "nothing loaded from elsewhere")
	require.Contains(t, string(html), "<td class=\"l\">dot</td><td class=\"l\">fresh</td><td>0/1</td>", "a failed cell shows 0 answered")
	// fiber, fresh, doq: 20 values 2.2 + 0.01·i; the median is the mean
	// of the middle two, 2.2 + 0.095 RTT.
	var doq dnsrtt.Stat
	for _, s := range in.Results[0].Results.(*dnsrtt.Samples).Stats() {
		if s.Profile == "fiber" && s.Transport == "doq" && s.Condition == "fresh" {
			doq = s
		}
	}
	require.InDelta(t, 2.295, doq.MedianRTT, 1e-9)
	require.Equal(t, 20, doq.OK)
	// 2456 octets up at 109.1 Mbit/s, 4112 down at 99.9.
	require.InDelta(t, 0.509, doq.SerialMs, 0.001)
	require.Contains(t, string(html), "<th>serial ms</th>")

	_, err = report.Render(report.Input{}, dir, "empty")
	require.ErrorContains(t, err, "no samples")
}

// TestFailedLinkCheckMakesFindingsInconclusive: a run whose link did
// not hold earns no verdict, and the header says what the link section
// says.
func TestFailedLinkCheckMakesFindingsInconclusive(t *testing.T) {
	in := samples(t)
	in.Runs = []store.Run{{ID: "e1-fiber", Kind: "experiment:dns-rtt"}}
	in.Links = []*experiment.LinkCheck{
		{Run: "e1-fiber", When: "before", Profile: "fiber", OK: true},
		{Run: "e1-fiber", When: "after", Profile: "fiber", OK: false, Why: "RTT error p99 1400 µs > 1000"},
	}
	rep, err := report.Render(in, t.TempDir(), "doxlab report: test")
	require.NoError(t, err)
	require.Equal(t, experiment.Inconclusive, rep.Findings[0].Verdict, "DoUDP in one RTT would hold, but the link did not")
	require.Contains(t, rep.Findings[0].Reason, "a link check of these runs failed (run e1-fiber (fiber, after): RTT error p99 1400 µs > 1000)")
	require.Equal(t, experiment.NoData, rep.Findings[1].Verdict)
	html, err := os.ReadFile(rep.HTML)
	require.NoError(t, err)
	require.Contains(t, string(html), "2 link checks recorded with the runs, 1 FAILED")
	require.NotContains(t, string(html), "fidelity was not recorded")
	require.Contains(t, string(html), "1 link check(s) failed")

	// Another experiment's failed check leaves these findings alone.
	in.Runs = append(in.Runs, store.Run{ID: "web-x-4g", Kind: "experiment:web"})
	in.Links[1].Run = "web-x-4g"
	rep, err = report.Render(in, t.TempDir(), "doxlab report: test")
	require.NoError(t, err)
	require.Equal(t, experiment.Holds, rep.Findings[0].Verdict, rep.Findings[0].Reason)
}

// TestReportRendersInChromium opens the page in headless Chromium at a
// desktop and a laptop width, as a reader would: the findings come
// first, every figure draws data and links it, nothing needs sideways
// scrolling, and the screenshots are not blank.
func TestReportRendersInChromium(t *testing.T) {
	testutil.NeedChromium(t)
	dir := t.TempDir()
	rep, err := report.Render(samples(t), dir, "doxlab report: test")
	require.NoError(t, err)
	pages, err := reportcheck.Open(context.Background(), rep.HTML, t.TempDir(), 1440, 1024)
	require.NoError(t, err)
	for _, p := range pages {
		require.Equal(t, []string{"holds", "no data"}, p.Findings, "%d px", p.Width)
		require.Equal(t, []string{"dns"}, p.Sections)
		require.Len(t, p.Figures, 3)
		for _, f := range p.Figures {
			require.Greater(t, f.Marks, 50, "%s draws its data", f.ID)
			require.False(t, f.NoData, "%s has an empty panel", f.ID)
			require.True(t, f.CSV, "%s links its data", f.ID)
			require.Empty(t, f.Legible.Problems, "%s reads cleanly at %d px", f.ID, p.Width)
			require.Greater(t, f.Width, 0.6*float64(min(p.Width, 1180)), "%s fills the column at %d px", f.ID, p.Width)
		}
		require.False(t, p.Overflow, "no sideways scrolling at %d px", p.Width)
		fh, err := os.Open(p.Shot)
		require.NoError(t, err)
		img, err := png.Decode(fh)
		fh.Close()
		require.NoError(t, err)
		// Count non-white pixels: a rendered table and plots have many.
		ink := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y += 4 {
			for x := b.Min.X; x < b.Max.X; x += 4 {
				r, g, bl, _ := img.At(x, y).RGBA()
				if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
					ink++
				}
			}
		}
		require.Greater(t, ink, 2000, "the screenshot is nearly blank")
	}
}

// TestLoadTakesProfilesFromTheStore: a run's link is the one it recorded,
// even under a built-in profile's name.
func TestLoadTakesProfilesFromTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	custom := testbed.Profile{Name: "fiber", Up: testbed.Direction{Rate: 1e6}, Down: testbed.Direction{Rate: 2e6}}
	run := store.NewRun("experiment:dns-rtt", "fiber", map[string]any{"profile": custom})
	run.ID = "dnsrtt-x-fiber"
	require.NoError(t, st.BeginRun(ctx, run))
	profiles, err := dnsrtt.StoredProfiles(ctx, st)
	require.NoError(t, err)
	require.Equal(t, custom, profiles[run.ID])
	in, runs, err := report.Load(ctx, st, "dnsrtt-x")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "dns-rtt", in.Results[0].Experiment)
	ms := dnsrtt.SerializationMs(store.Row{RunID: run.ID, BytesSent: 125, BytesReceived: 250}, profiles[run.ID])
	require.InDelta(t, 2.0, ms, 0.001, "125 octets at 1 Mbit/s and 250 at 2, no packets")
	require.True(t, in.Empty(), "a run with no samples")
}

// TestLoadInTheRegistrysOrder: the experiments load two at a time, and
// the report has them in the registry's order all the same; a load that
// fails names the first experiment, in that order, that failed.
func TestLoadInTheRegistrysOrder(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	var want []string
	for _, info := range experiment.Registered() {
		want = append(want, info.Name)
	}
	for range 5 {
		in, _, err := report.Load(ctx, st, "")
		require.NoError(t, err)
		var got []string
		for _, r := range in.Results {
			got = append(got, r.Experiment)
		}
		require.Equal(t, want, got)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = report.Load(gone, st, "")
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, strings.HasPrefix(err.Error(), "loading "+want[0]+": "), "%v", err)
}

// TestTitleAndSummarySayWhatWhereWhen: the page opens like a paper's
// results section: what was measured, on which links, when, and what the
// findings say; each section's table shown, not folded away.
func TestTitleAndSummarySayWhatWhereWhen(t *testing.T) {
	day := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	runs := []store.Run{{ID: "e1-fiber", Kind: "experiment:dns-rtt", Profile: "fiber", StartedAt: day}, {ID: "e1-dsl", Kind: "experiment:dns-rtt", Profile: "dsl", StartedAt: day.Add(time.Hour)}}
	require.Equal(t, "doxlab: the dns-rtt experiment on 2 emulated access profiles, 2026-11-26", report.Title(runs))
	require.Equal(t, "doxlab: 2 experiments on real networks, 2026-11-26 to 2026-11-27",
		report.Title([]store.Run{{Kind: "experiment:web", StartedAt: day}, {Kind: "experiment:hol", StartedAt: day.Add(24 * time.Hour)}}))
	in := samples(t)
	in.Runs = runs
	rep, err := report.Render(in, t.TempDir(), report.Title(runs))
	require.NoError(t, err)
	html, err := os.ReadFile(rep.HTML)
	require.NoError(t, err)
	page := string(html)
	i := strings.Index(page, "<h1>")
	require.Positive(t, i)
	page = page[i:] // after the embedded font
	require.Contains(t, page, "<h1>doxlab: the dns-rtt experiment on 2 emulated access profiles, 2026-11-26</h1>")
	require.Contains(t, page, `<p class="summary">This report covers 2 runs: DNS exchange in round trips (122 samples). The testbed emulated the access links fiber, dsl`)
	require.Contains(t, page, "Of the papers&#39; 2 claims checked here, 1 holds, 0 differ and 1 is inconclusive or lacks data")
	require.NotContains(t, page, "<details><summary>Table", "the key table is shown")
	require.Contains(t, page, `<div class="table">`)
}

// TestMixedMethodsAreSaid: the header names each experiment's method
// versions, and a store whose runs of one experiment mix versions (or
// mix recorded and unrecorded ones) says so above the findings.
func TestMixedMethodsAreSaid(t *testing.T) {
	in := samples(t)
	in.Runs = []store.Run{{ID: "e1-fiber", Kind: "experiment:dns-rtt", Method: 1}, {ID: "e2-fiber", Kind: "experiment:dns-rtt", Method: 1}}
	rep, err := report.Render(in, t.TempDir(), "doxlab report: test")
	require.NoError(t, err)
	html, err := os.ReadFile(rep.HTML)
	require.NoError(t, err)
	require.Contains(t, string(html), "methods: dns-rtt v1;")
	require.NotContains(t, string(html), `id="mixed-methods"`)

	in.Runs = append(in.Runs, store.Run{ID: "e3-fiber", Kind: "experiment:dns-rtt", Method: 2}, store.Run{ID: "e0-fiber", Kind: "experiment:dns-rtt"},
		store.Run{ID: "m", Kind: "measure"})
	rep, err = report.Render(in, t.TempDir(), "doxlab report: test")
	require.NoError(t, err)
	html, err = os.ReadFile(rep.HTML)
	require.NoError(t, err)
	require.Contains(t, string(html), "methods: dns-rtt v0 (not recorded) and v1 and v2;")
	require.Contains(t, string(html), "<li>dns-rtt: 1 run of v0 (not recorded), 2 of v1, 1 of v2</li>")
	require.Less(t, strings.Index(string(html), `id="mixed-methods"`), strings.Index(string(html), `id="findings"`))
}

package reportcheck_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/reportcheck"
	"github.com/doxlab/doxlab/internal/testutil"
)

// svg is a figure as gonum's vgsvg writes one: y up, each text flipped
// back, legend entries a short stroked segment beside their label.
func svg(body string) string {
	return `<?xml version="1.0"?>
<svg width="300pt" height="200pt" viewBox="0 0 300 200" xmlns="http://www.w3.org/2000/svg">
<g transform="scale(1, -1) translate(0, -200)">` + body + `</g></svg>`
}

func text(x, y, s string) string {
	return `<text x="` + x + `" y="-` + y + `" transform="scale(1, -1)" style="font-family:serif;font-size:10px">` + s + `</text>`
}

func entry(y, stroke, dash, label string) string {
	style := "fill:none;stroke:" + stroke + ";stroke-width:1.5"
	if dash != "" {
		style += ";stroke-dasharray:" + dash
	}
	return `<path d="M200,` + y + `L218,` + y + `" style="` + style + `" />` + text("220.5", y, label)
}

// TestLegibleFindsWhatAReaderWould: the check must fail on a figure with
// cut text, text on text and two series alike, and pass the same figure
// fixed; legend rows as close as gonum sets them are not an overlap.
func TestLegibleFindsWhatAReaderWould(t *testing.T) {
	testutil.NeedChromium(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.svg")
	good := filepath.Join(dir, "good.svg")
	require.NoError(t, os.WriteFile(bad, []byte(svg(
		text("250", "20", "DNS exchange (multiples of the RTT)")+ // runs off the right edge
			text("20", "100", "99.99%")+text("30", "101", "99.9%")+ // on each other
			entry("150", "#0072B2", "", "doq")+entry("141.5", "#0072B2", "", "dot"))), 0o644)) // alike
	require.NoError(t, os.WriteFile(good, []byte(svg(
		text("20", "20", "DNS exchange (RTTs)")+text("20", "100", "99.99%")+text("20", "120", "99.9%")+
			entry("150", "#0072B2", "", "doq")+entry("141.5", "#56B4E9", "5,3", "dot")+entry("133", "#0072B2", "", "doq"))), 0o644))
	got, err := reportcheck.Files(context.Background(), bad, good)
	require.NoError(t, err)
	problems := got[bad].Problems
	require.Len(t, problems, 3, "%q", problems)
	require.True(t, slices.ContainsFunc(problems, func(p string) bool {
		return strings.Contains(p, `"DNS exchange (multiples of the RTT)" leaves the figure`)
	}), "%q", problems)
	require.True(t, slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, `"99.99%" overlaps "99.9%"`) }), "%q", problems)
	require.True(t, slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, `"doq" and "dot" share colour and dash`) }), "%q", problems)
	require.Equal(t, 2, got[bad].Legend)
	require.Empty(t, got[good].Problems, "a label seen twice is one series, in two panels' legends")
	require.Equal(t, 3, got[good].Legend)
}

// TestReportIsLegible checks a report already rendered, such as a full
// `make demo` one: DOXLAB_REPORT=demo-output/report/report.html.
// Every figure on the page and every one-column file beside it.
func TestReportIsLegible(t *testing.T) {
	html := os.Getenv("DOXLAB_REPORT")
	if html == "" {
		t.Skip("DOXLAB_REPORT names no report to check")
	}
	testutil.NeedChromium(t)
	pages, err := reportcheck.Open(context.Background(), html, t.TempDir(), 1440)
	require.NoError(t, err)
	var cols []string
	for _, f := range pages[0].Figures {
		for _, p := range f.Legible.Problems {
			t.Errorf("figure %s: %s", f.ID, p)
		}
		cols = append(cols, filepath.Join(filepath.Dir(html), f.ID+"-1col.svg"))
	}
	t.Logf("%d figures on the page legible", len(pages[0].Figures))
	got, err := reportcheck.Files(context.Background(), cols...)
	require.NoError(t, err)
	for _, f := range cols {
		for _, p := range got[f].Problems {
			t.Errorf("%s: %s", filepath.Base(f), p)
		}
	}
}

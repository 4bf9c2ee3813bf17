package report_test

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/doxlab/doxlab/experiment/dnsrtt"
	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/store"
)

// hostile are strings a store may hold that a measured resolver, a
// vantage point's operator or an edited store chose: markup, an
// attribute's escape, a spreadsheet formula.
var hostile = []string{
	`<script>alert("t")</script>`,
	`"><img src=x onerror=alert(1)>`,
	`</text><foreignObject><iframe src=javascript:alert(2)>`,
	`=HYPERLINK("http://evil.example","x")`,
	"\x1b]0;pwned\x07\x1b[2J\rfake line",
}

// TestHostileNamesStayText: names the store holds (resolvers, vantage
// points, their places and networks, rcodes) are text in the report
// wherever they show (tables, the figures' inline SVG, the titles), never
// markup: the page holds no element, attribute or script they made; no
// cell of a figure's data begins with what a spreadsheet runs; and the
// tables printed on a terminal hold no escape sequence of theirs.
func TestHostileNamesStayText(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	var rows []store.Row
	for i, h := range hostile {
		for rep := range 6 {
			x := float64(rep) / 10
			rows = append(rows, store.Row{RunID: "c1", Kind: "campaign", Target: h, URL: "udp://" + h, Transport: "udp", Condition: "fresh",
				Status: "ok", Rcode: "NOERROR", Vantage: hostile[(i+1)%len(hostile)], VantageLocation: h, VantageNetwork: h,
				TotalMs: f(10 + x), TotalRTT: f(1 + x), ResolveRTT: f(1 + x), HandshakeRTT: f(0), ProbeRTTMs: f(10)})
		}
		rows = append(rows, store.Row{RunID: "c1", Kind: "campaign", Target: h, URL: "udp://" + h, Transport: "udp", Condition: "fresh",
			Status: "rcode", Rcode: h, Vantage: hostile[0]})
	}
	in := report.Input{Results: []report.Results{{Experiment: "dns-rtt", Results: dnsrtt.NewSamples(rows, nil)}}}
	dir := t.TempDir()
	rep, err := report.Render(in, dir, "doxlab report: "+hostile[1])
	require.NoError(t, err)
	page, err := os.ReadFile(rep.HTML)
	require.NoError(t, err)

	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "img", "iframe", "foreignobject", "object", "embed":
				t.Errorf("a <%s> element in the page", n.Data)
			case "script":
				if n.FirstChild != nil && strings.Contains(n.FirstChild.Data, "alert") {
					t.Errorf("a script of the store's: %q", n.FirstChild.Data)
				}
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") {
					t.Errorf("<%s %s=%q>: an event handler", n.Data, a.Key, a.Val)
				}
				if strings.Contains(strings.ToLower(a.Val), "javascript:") {
					t.Errorf("<%s %s=%q>: a javascript: URL", n.Data, a.Key, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	require.Contains(t, string(page), "&lt;script&gt;alert", "the name is shown, as text")

	// On a terminal (doxlab report's tables), no escape or carriage
	// return of theirs.
	var term strings.Builder
	require.NoError(t, in.Results[0].Results.WriteTable(&term))
	require.NotContains(t, term.String(), "\x1b", "a name drives no terminal")
	require.NotContains(t, term.String(), "\r", "a name overwrites no line")
	require.Contains(t, term.String(), "<script>", "the names are there")

	csvs, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	require.NoError(t, err)
	require.NotEmpty(t, csvs)
	for _, p := range csvs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		require.NoError(t, err, p)
		for _, rec := range recs {
			for _, cell := range rec {
				if cell != "" && strings.ContainsRune("=+@", rune(cell[0])) {
					t.Errorf("%s: a cell a spreadsheet would run: %q", filepath.Base(p), cell)
				}
			}
		}
	}
}

package pageload_test

import (
	"net/url"
	"testing"

	"github.com/doxlab/doxlab/pageload"
)

// FuzzFromHTML: a page's HTML (a hostile page's too) gives a graph a
// replay can follow, or an error: every resource an http(s) URL without
// a fragment, named once, discovered within its parent's body.
func FuzzFromHTML(f *testing.F) {
	for _, seed := range []string{
		`<html><head><link rel=stylesheet href=/a.css><script src="b.js"></script></head><body><img src=//cdn.example/c.png#x><img src="data:,x"></body></html>`,
		`<link rel="preload" href="javascript:alert(1)"><link rel="shortcut icon" href="/f.ico"><img src="/f.ico">`,
		`<img src="http://[::1]:80/x"><script src="https://u:p@h/"></script>`,
		"<scr\x00ipt src=/x></script><img src=\"\xff\">",
	} {
		f.Add("https://page.example/dir/", []byte(seed))
	}
	f.Fuzz(func(t *testing.T, page string, body []byte) {
		if u, err := url.Parse(page); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return // FromHTML is given the page's own URL, which the loader fetched
		}
		g, err := pageload.FromHTML(page, body)
		if err != nil {
			return
		}
		if err := g.Check(); err != nil {
			t.Fatalf("a graph FromHTML gave fails its check: %v", err)
		}
		seen := map[string]bool{}
		for i, r := range g.Resources {
			u, err := url.Parse(r.URL)
			if err != nil || (i > 0 && u.Fragment != "") || seen[r.URL] {
				t.Fatalf("resource %d: %q (twice: %v)", i, r.URL, seen[r.URL])
			}
			seen[r.URL] = true
		}
		_, _, _ = g.BrowserMs(), g.WireEnds(), g.Hosts()
	})
}

// FuzzParseGraph: a graph file (a corpus page's, or one a user gives)
// is refused or follows the rules a replay relies on.
func FuzzParseGraph(f *testing.F) {
	f.Add([]byte(`{"page":"https://x/","resources":[{"url":"https://x/","parent":-1,"size":100},{"url":"https://x/a","parent":0,"after_bytes":50,"gap_ms":3}],"onload_gap_ms":1}`))
	f.Add([]byte(`{"page":"https://x/","resources":[{"url":"https://x/","parent":-1},{"url":"https://x/a","parent":5}]}`))
	f.Add([]byte(`{"resources":[{"url":"https://x/","parent":-1,"gap_ms":-1e308}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := pageload.ParseGraph(b)
		if err != nil {
			return
		}
		if err := g.Check(); err != nil {
			t.Fatalf("ParseGraph gave a graph that fails its check: %v", err)
		}
		for i, r := range g.Resources {
			if i > 0 && (r.Parent < 0 || r.Parent >= i) {
				t.Fatalf("resource %d's parent %d", i, r.Parent)
			}
		}
		_, _, _ = g.BrowserMs(), g.WireEnds(), g.Hosts()
	})
}

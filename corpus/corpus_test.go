package corpus_test

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/internal/order"
)

// TestCorpusKeepsThePapersSizes checks the Wikipedia-like page carries the
// cross-layer paper's object sizes to the octet, and that pages are
// picked and added with clear errors.
func TestCorpusKeepsThePapersSizes(t *testing.T) {
	pages, err := corpus.Extract(t.TempDir())
	require.NoError(t, err)
	require.Len(t, pages, len(corpus.Corpus)+len(corpus.Sites), "the paper's pages and the multi-origin ones")
	wiki, err := corpus.Select(pages, []string{"wiki"})
	require.NoError(t, err)
	require.Equal(t, "wiki."+corpus.Domain, wiki[0].Host)
	for file, size := range map[string]int64{
		"index.html": 18252, "portal/wikipedia.org/assets/js/index.js": 614,
		"portal/wikipedia.org/assets/img/Wikipedia-logo-v2.png": 15857, "portal/wikipedia.org/assets/img/Wikipedia_wordmark.png": 2039,
		"portal/wikipedia.org/assets/img/sprite.svg": 17229,
	} {
		st, err := os.Stat(filepath.Join(wiki[0].Dir, file))
		require.NoError(t, err)
		require.Equal(t, size, st.Size(), file)
	}
	insta, err := corpus.Select(pages, []string{"insta"})
	require.NoError(t, err)
	scripts, _ := filepath.Glob(filepath.Join(insta[0].Dir, "static/js/*.js"))
	require.Len(t, scripts, 7, "seven scripts, as the paper's Instagram page")

	_, err = corpus.Select(pages, []string{"nope"})
	require.ErrorContains(t, err, `no page "nope"`)
	_, err = corpus.Snapshot(t.TempDir(), t.TempDir())
	require.ErrorContains(t, err, "no index.html")
	dir := filepath.Join(t.TempDir(), "mirror")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>hi</p>"), 0o644))
	p, err := corpus.Snapshot(dir, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, "mirror."+corpus.Domain, p.Host)
	require.False(t, p.MultiOrigin())
}

// TestMultiHostSnapshot: a `wget -mpEk -H` mirror, one directory per
// host, is a page over those hosts, each served under its own name, the
// links wget made relative across hosts absolute again.
func TestMultiHostSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shop")
	write := func(rel, body string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(body), 0o644))
	}
	write("www.shop.example/index.html", `<link href="css/site.css" rel="stylesheet"><script src="../cdn.example.net/lib/x.js"></script>`+
		`<img src='../img.example.org/a.png'><a href="https://elsewhere.example/">x</a>`)
	write("www.shop.example/css/site.css", `body{background:url(../../img.example.org/bg.png)} .l{background:url("logo.png")}`)
	write("cdn.example.net/lib/x.js", `var x`)
	write("img.example.org/a.png", "png")
	write("img.example.org/bg.png", "png")
	work := t.TempDir()
	p, err := corpus.Snapshot(dir, work)
	require.NoError(t, err)
	require.Equal(t, "shop", p.Name)
	require.Equal(t, "www.shop.example", p.Host)
	require.Equal(t, []string{"www.shop.example", "cdn.example.net", "img.example.org"}, p.Hostnames())
	require.Equal(t, corpus.PartyThird, p.Origins[1].Party)
	doc, err := os.ReadFile(filepath.Join(p.Dir, "index.html"))
	require.NoError(t, err)
	require.Contains(t, string(doc), `href="css/site.css"`, "a link within the host stays")
	require.Contains(t, string(doc), `src="https://cdn.example.net/lib/x.js"`)
	require.Contains(t, string(doc), `src='https://img.example.org/a.png'`)
	require.Contains(t, string(doc), `href="https://elsewhere.example/"`)
	css, err := os.ReadFile(filepath.Join(p.Dir, "css", "site.css"))
	require.NoError(t, err)
	require.Contains(t, string(css), `url(https://img.example.org/bg.png)`)
	require.Contains(t, string(css), `url("logo.png")`)
	orig, _ := os.ReadFile(filepath.Join(dir, "www.shop.example", "index.html"))
	require.Contains(t, string(orig), "../cdn.example.net", "the mirror itself is left alone")

	write("cdn.example.net/index.html", "<p>another page</p>")
	_, err = corpus.Snapshot(dir, t.TempDir())
	require.ErrorContains(t, err, "several host directories hold an index.html")
}

// TestSnapshotRewritesEveryLinkWgetMakes: wget -k makes relative every
// link it follows, not only a quoted src or href and CSS's url(): a
// responsive image's srcset candidates, an unquoted attribute (minified
// HTML), a preload's imagesrcset and CSS's @import of a string. Each one
// into another host's directory is that host's absolute URL again, and
// the others, and what surrounds them, stay as they were.
func TestSnapshotRewritesEveryLinkWgetMakes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "news")
	write := func(rel, body string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(body), 0o644))
	}
	write("www.news.example/index.html", `<img srcset="../img.example.org/a-1x.png 1x, ../img.example.org/a-2x.png  2x,local.png 3x" src=../img.example.org/a.png alt=x>`+
		`<link rel=preload as=image imagesrcset='../img.example.org/w640.jpg 640w, ../img.example.org/w1280.jpg 1280w'>`+
		`<script src=../cdn.example.net/app.js defer></script><a href=about.html>about</a>`+
		`<source data-srcset="../img.example.org/lazy.webp">`)
	write("www.news.example/css/main.css", `@import "../../cdn.example.net/fonts.css"; @import 'print.css' print; .a{background:url('../../img.example.org/bg.png')}`)
	write("cdn.example.net/app.js", "var a")
	write("cdn.example.net/fonts.css", "")
	write("img.example.org/a.png", "png")
	p, err := corpus.Snapshot(dir, t.TempDir())
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(p.Dir, "index.html"))
	require.NoError(t, err)
	require.Equal(t, `<img srcset="https://img.example.org/a-1x.png 1x, https://img.example.org/a-2x.png  2x,local.png 3x" src=https://img.example.org/a.png alt=x>`+
		`<link rel=preload as=image imagesrcset='https://img.example.org/w640.jpg 640w, https://img.example.org/w1280.jpg 1280w'>`+
		`<script src=https://cdn.example.net/app.js defer></script><a href=about.html>about</a>`+
		`<source data-srcset="https://img.example.org/lazy.webp">`, string(doc))
	css, err := os.ReadFile(filepath.Join(p.Dir, "css", "main.css"))
	require.NoError(t, err)
	require.Equal(t, `@import "https://cdn.example.net/fonts.css"; @import 'print.css' print; .a{background:url('https://img.example.org/bg.png')}`, string(css))
}

// TestShippedGraphs: every corpus page ships a graph over its origins,
// as the testbed serves them, whose resources are all in the corpus.
func TestShippedGraphs(t *testing.T) {
	pages, err := corpus.Extract(t.TempDir())
	require.NoError(t, err)
	for _, p := range pages {
		g, err := corpus.Graph(p.Name)
		require.NoError(t, err, p.Name)
		require.Equal(t, "https://"+p.Host+"/", g.Page)
		require.ElementsMatch(t, p.Hostnames(), g.Hosts(), p.Name)
		dirs := map[string]string{}
		for _, o := range p.Origins {
			dirs[o.Host] = o.Dir
		}
		for _, r := range g.Resources {
			u, err := url.Parse(r.URL)
			require.NoError(t, err)
			path := strings.TrimPrefix(u.Path, "/")
			if path == "" {
				path = "index.html"
			}
			_, err = os.Stat(filepath.Join(dirs[u.Host], path))
			require.NoError(t, err, "%s: %s is in the corpus", p.Name, r.URL)
		}
	}
	_, err = corpus.Graph("nosuch")
	require.ErrorContains(t, err, "no shipped graph")
}

// TestEveryPageHasItsPlace: tables and figures list the corpus' pages in
// its own order (the paper's pages, then the multi-origin ones by size),
// which internal/order must know: a page added here without its place
// there fails.
func TestEveryPageHasItsPlace(t *testing.T) {
	names := slices.Clone(corpus.Corpus)
	for _, s := range corpus.Sites {
		names = append(names, s.Name)
	}
	for _, n := range names {
		require.True(t, order.Known(n), "page %s has no place in internal/order", n)
	}
	sorted := slices.SortedFunc(slices.Values(names), order.Compare)
	require.Equal(t, names, sorted)
}

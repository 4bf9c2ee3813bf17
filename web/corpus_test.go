package web_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/web"
)

// TestCorpusKeepsThePapersSizes checks the Wikipedia-like page carries the
// cross-layer paper's object sizes to the octet, and that pages are
// picked and added with clear errors.
func TestCorpusKeepsThePapersSizes(t *testing.T) {
	pages, err := web.Extract(t.TempDir())
	require.NoError(t, err)
	require.Len(t, pages, len(web.Corpus)+len(web.Sites), "the paper's pages and the multi-origin ones")
	wiki, err := web.Select(pages, []string{"wiki"})
	require.NoError(t, err)
	require.Equal(t, "wiki."+web.Domain, wiki[0].Host)
	for file, size := range map[string]int64{
		"index.html": 18252, "portal/wikipedia.org/assets/js/index.js": 614,
		"portal/wikipedia.org/assets/img/Wikipedia-logo-v2.png": 15857, "portal/wikipedia.org/assets/img/Wikipedia_wordmark.png": 2039,
		"portal/wikipedia.org/assets/img/sprite.svg": 17229,
	} {
		st, err := os.Stat(filepath.Join(wiki[0].Dir, file))
		require.NoError(t, err)
		require.Equal(t, size, st.Size(), file)
	}
	insta, err := web.Select(pages, []string{"insta"})
	require.NoError(t, err)
	scripts, _ := filepath.Glob(filepath.Join(insta[0].Dir, "static/js/*.js"))
	require.Len(t, scripts, 7, "seven scripts, as the paper's Instagram page")

	_, err = web.Select(pages, []string{"nope"})
	require.ErrorContains(t, err, `no page "nope"`)
	_, err = web.Snapshot(t.TempDir())
	require.ErrorContains(t, err, "no index.html")
	dir := filepath.Join(t.TempDir(), "mirror")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>hi</p>"), 0o644))
	p, err := web.Snapshot(dir)
	require.NoError(t, err)
	require.Equal(t, "mirror."+web.Domain, p.Host)
}

// TestShippedGraphs: every corpus page ships a graph over its origins,
// as the testbed serves them, whose resources are all in the corpus.
func TestShippedGraphs(t *testing.T) {
	pages, err := web.Extract(t.TempDir())
	require.NoError(t, err)
	for _, p := range pages {
		g, err := web.Graph(p.Name)
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
	_, err = web.Graph("nosuch")
	require.ErrorContains(t, err, "no shipped graph")
}

package corpus_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/internal/testutil"
)

// TestSnapshotOfAWgetMirror: a page on one loopback host whose resources
// live on another (127.0.0.1 and 127.0.0.2, two hosts to wget), mirrored
// by GNU Wget itself as docs/experiments/web.md says (wget -mpEk -H), snapshots
// to a page over both, and every link wget made relative into the other
// host's directory (an image's src and srcset, a script, a style sheet,
// an inline @import) is that host's absolute URL again, while a style
// sheet's link into its own host stays as it is.
func TestSnapshotOfAWgetMirror(t *testing.T) {
	wget := testutil.Need(t, "wget", "apt-get install wget")
	files := map[string]string{
		"/a.png": "png", "/b.png": "png", "/c.png": "png", "/bg.png": "png", "/app.js": "var a",
		"/site.css": "body{background:url(bg.png)}", "/imp.css": "p{}",
	}
	serve := func(addr string, files map[string]string) string {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, ok := files[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			if filepath.Ext(r.URL.Path) == ".css" {
				w.Header().Set("Content-Type", "text/css")
			}
			fmt.Fprint(w, body)
		}))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return ln.Addr().String()
	}
	other := serve("127.0.0.2:0", files)
	page := serve("127.0.0.1:0", map[string]string{"/index.html": fmt.Sprintf(`<html><head><link rel="stylesheet" href="http://%[1]s/site.css">`+
		`<style>@import "http://%[1]s/imp.css";</style></head><body>`+
		`<img srcset="http://%[1]s/a.png 1x, http://%[1]s/b.png 2x" src="http://%[1]s/c.png"><script src="http://%[1]s/app.js"></script></body></html>`, other)})

	dir := filepath.Join(t.TempDir(), "news")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, wget, "-q", "-mpEk", "-H", "-D", "127.0.0.1,127.0.0.2", "-T", "5", "-t", "1", "-P", dir, "http://"+page+"/index.html").CombinedOutput()
	require.NoError(t, err, "%s", out)
	mirrored, err := os.ReadFile(filepath.Join(dir, page, "index.html"))
	require.NoError(t, err)
	require.Contains(t, string(mirrored), `srcset="../`+other+`/a.png 1x`, "wget made the links relative across hosts")

	p, err := corpus.Snapshot(dir, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, []string{page, other}, p.Hostnames())
	doc, err := os.ReadFile(filepath.Join(p.Dir, "index.html"))
	require.NoError(t, err)
	for _, want := range []string{
		`href="https://` + other + `/site.css"`,
		`@import "https://` + other + `/imp.css"`,
		`srcset="https://` + other + `/a.png 1x, https://` + other + `/b.png 2x"`,
		`src="https://` + other + `/c.png"`,
		`src="https://` + other + `/app.js"`,
	} {
		require.Contains(t, string(doc), want)
	}
	require.NotContains(t, string(doc), "../", "no link climbs out of the page's host")
	css, err := os.ReadFile(filepath.Join(p.Origins[1].Dir, "site.css"))
	require.NoError(t, err)
	require.Equal(t, "body{background:url(bg.png)}", string(css), "a link within its own host stays")
}

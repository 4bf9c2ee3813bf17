package browser_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
)

// TestLoadCorpusOverH3 loads every corpus page over HTTP/3 from doxlab's
// web server on loopback, and checks the timings are complete, the
// protocol was h3 throughout, and a kept ticket gives 0-RTT (the server's
// connection record says so) while a forgotten one does not.
func TestLoadCorpusOverH3(t *testing.T) {
	if _, err := browser.FindExec(""); err != nil {
		testutil.Missing(t, "chromium")
	}
	all, err := corpus.Extract(t.TempDir())
	require.NoError(t, err)
	// The paper's pages, one origin each: the multi-origin ones name
	// their hosts on port 443, which the testbed serves
	// (experiment/web tests them there).
	pages, err := corpus.Select(all, corpus.Corpus)
	require.NoError(t, err)
	roots := map[string]string{}
	for _, p := range pages {
		roots[p.Host] = p.Dir
	}
	cfg := &server.Config{Listen: server.Listen{Web: "127.0.0.1:0"}, Web: server.Web{Roots: roots}}
	require.NoError(t, cfg.Validate())
	srv, err := server.New(cfg)
	require.NoError(t, err)
	conns := make(chan *server.Record, 100)
	srv.OnRecord(func(r *server.Record) {
		if r.Kind == "conn" && r.Listener == "web" {
			conns <- r
		}
	})
	require.NoError(t, srv.Start())
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Addr("web").String())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var force []string
	for _, p := range pages {
		force = append(force, p.Host+":"+port)
	}
	b, err := browser.Launch(ctx, browser.Options{
		ForceQUIC: force, SPKI: []string{srv.SPKI()},
		Flags: []string{"host-resolver-rules=MAP *." + corpus.Domain + " 127.0.0.1"},
	})
	require.NoError(t, err)
	defer b.Close()
	require.Contains(t, b.Version(), "Chrome")

	for _, p := range pages {
		t.Run(p.Name, func(t *testing.T) {
			base := "https://" + p.Host + ":" + port + "/"
			l := b.Load(ctx, base, 30*time.Second)
			require.Equal(t, browser.LoadOK, l.Status, l.Error)
			require.Equal(t, "h3", l.Protocol)
			require.Greater(t, l.PLTMs, 0.0)
			require.Greater(t, l.FCPMs, 0.0)
			require.GreaterOrEqual(t, l.PLTMs, l.TTFBMs)
			require.NotEmpty(t, l.Navigation)
			got := map[string]bool{}
			for _, r := range l.Resources {
				require.Equal(t, "h3", r.Protocol, r.Name)
				got[strings.TrimPrefix(r.Name, base)] = true
			}
			require.NoError(t, filepath.WalkDir(p.Dir, func(path string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(p.Dir, path)
				if err == nil && !d.IsDir() && rel != "index.html" {
					require.True(t, got[rel], "%s was loaded (got %v)", rel, got)
				}
				return err
			}))
		})
	}

	drain := func() (recs []*server.Record) {
		for {
			select {
			case r := <-conns:
				recs = append(recs, r)
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}
	url := "https://" + pages[0].Host + ":" + port + "/"
	for _, forget := range []bool{false, true} {
		require.NoError(t, b.Reset(ctx, true))
		require.Equal(t, browser.LoadOK, b.Load(ctx, url, 30*time.Second).Status) // warm-up: a ticket
		require.NoError(t, b.Reset(ctx, forget))
		drain()
		l := b.Load(ctx, url, 30*time.Second)
		require.Equal(t, browser.LoadOK, l.Status, l.Error)
		recs := drain()
		require.Len(t, recs, 1, "one QUIC connection for the measured load")
		require.Equal(t, !forget, recs[0].Used0RTT, "0-RTT accepted unless the ticket was forgotten")
		require.Equal(t, !forget, recs[0].Resumed)
	}
}

func TestMissingBrowser(t *testing.T) {
	_, err := browser.Launch(context.Background(), browser.Options{Exec: "/nonexistent/chromium"})
	require.ErrorIs(t, err, browser.ErrNoBrowser)
	require.Contains(t, err.Error(), "apt-get install chromium")
}

// TestOwnResolverAndUserAgent runs Chromium in a mount namespace whose
// resolv.conf names a DNS server of the test's on 127.53.0.1: the page's
// name must be resolved there (the machine's resolv.conf is untouched),
// and the page's request must carry the User-Agent suffix.
func TestOwnResolverAndUserAgent(t *testing.T) {
	testutil.NeedRoot(t, "binding files over /etc needs root")
	if _, err := browser.FindExec(""); err != nil {
		testutil.Missing(t, "chromium")
	}
	dns, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.53.0.1:53", TCP: "127.53.0.1:53"}, Answers: server.Answers{Any: "127.0.0.1"}})
	require.NoError(t, err)
	names := make(chan string, 100)
	dns.OnRecord(func(r *server.Record) {
		if r.Kind == "query" {
			names <- r.QName
		}
	})
	require.NoError(t, dns.Start())
	defer dns.Close()
	agents := make(chan string, 10)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agents <- r.UserAgent()
		fmt.Fprint(w, "<html><body>hello</body></html>")
	}))
	defer web.Close()
	_, port, _ := net.SplitHostPort(web.Listener.Addr().String())

	dir := t.TempDir()
	resolv, hosts := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hosts")
	require.NoError(t, os.WriteFile(resolv, []byte("nameserver 127.53.0.1\n"), 0o644))
	require.NoError(t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644))
	before, _ := os.ReadFile("/etc/resolv.conf")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := browser.Launch(ctx, browser.Options{Etc: map[string]string{"resolv.conf": resolv, "hosts": hosts}, UserAgentSuffix: "doxlab-test (+https://lab.example/contact)"})
	require.NoError(t, err)
	defer b.Close()
	l := b.Load(ctx, "http://page.test:"+port+"/", 20*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, "%s", l.Error)
	var ua string
	select {
	case ua = <-agents:
	case <-time.After(5 * time.Second):
		t.Fatal("the page's server saw no request")
	}
	require.True(t, strings.HasSuffix(ua, " doxlab-test (+https://lab.example/contact)"), ua)
	require.NotContains(t, ua, "HeadlessChrome")
	require.Equal(t, b.UserAgent(), ua)
	got := false
	for len(names) > 0 {
		if <-names == "page.test." {
			got = true
		}
	}
	require.True(t, got, "the page's name was not asked of the namespace's resolver")
	after, _ := os.ReadFile("/etc/resolv.conf")
	require.Equal(t, string(before), string(after), "the machine's resolv.conf changed")
}

// TestSandboxedAsUser starts Chromium as root with Options.User, as a
// page worker does: every process of the browser must run as that user,
// and every renderer in Chromium's sandbox (seccomp-bpf, namespaces of
// its own); as root without a user it runs unsandboxed, which the check
// must catch.
func TestSandboxedAsUser(t *testing.T) {
	u := needBrowserUser(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>sandboxed</title><p>hello")
	}))
	defer page.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		user      string
		sandboxed bool
	}{{u, true}, {"", false}} {
		t.Run("user="+tc.user, func(t *testing.T) {
			b, err := browser.Launch(ctx, browser.Options{User: tc.user})
			require.NoError(t, err)
			defer b.Close()
			l := b.Load(ctx, page.URL, 20*time.Second)
			require.Equal(t, browser.LoadOK, l.Status, l.Error)
			c, err := b.Confinement()
			require.NoError(t, err)
			t.Logf("%+v", c)
			if tc.sandboxed {
				require.NoError(t, c.Holds())
				require.Equal(t, u, c.User)
				require.Positive(t, c.Renderers)
			} else {
				require.ErrorContains(t, c.Holds(), "run as root")
			}
		})
	}
	_, err := browser.Launch(ctx, browser.Options{User: "no-such-user-doxlab"})
	require.ErrorContains(t, err, "does not exist")
}

// TestPageCannotDownload: a page that starts downloads, by a link its
// script clicks and by a frame whose response is an attachment, gets no
// file written: headless Chromium saved each under HOME (Downloads/
// Unconfirmed NNNN.crdownload, a MiB each here), and a hostile page of a
// campaign's would have filled the vantage point's disk a load at a time.
func TestPageCannotDownload(t *testing.T) {
	testutil.NeedChromium(t)
	home := t.TempDir()
	t.Setenv("HOME", home) // the browser's, as root; a worker's is its profile
	served := make(chan struct{}, 4)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/file" {
			defer func() { served <- struct{}{} }()
			w.Header().Set("Content-Disposition", "attachment; filename=fill.bin")
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(bytes.Repeat([]byte("x"), 1<<20))
			return
		}
		fmt.Fprint(w, `<!doctype html><title>downloads</title><a id=a href="/file?1" download>f</a><iframe src="/file?2"></iframe><script>document.getElementById('a').click()</script>`)
	}))
	defer page.Close()
	ctx, b := launch(t, browser.Options{})
	l := b.Load(ctx, page.URL, 20*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, l.Error)
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		// Refused before its request: nothing to wait for.
	}
	time.Sleep(time.Second) // a download's first octets reach the disk within it
	var saved []string
	require.NoError(t, filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/.config/") && !strings.Contains(p, "/.cache/") {
			saved = append(saved, p)
		}
		return err
	}))
	require.Empty(t, saved, "a page's downloads were saved")
}

// TestPageStorageIsBounded: a page that stores 640 MiB in Cache Storage
// (16 MiB at a time) in a browser run as its user is stopped at the
// bound, with the quota's error, and nothing of it reaches the disk: the
// profile's Default directory is a tmpfs of the browser's own. Without
// the bound Chromium let one page of a test store 730 MiB on disk, up
// to 60 % of the disk.
func TestPageStorageIsBounded(t *testing.T) {
	u := needBrowserUser(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>fill</title><script>
(async () => {
  let stored = 0, why = 'none';
  try {
    const c = await caches.open('fill');
    const blob = new Uint8Array(16 << 20);
    for (let i = 0; i < 40; i++) { blob[0] = i; await c.put('/k' + i, new Response(blob.slice())); stored++; }
  } catch (e) { why = e.name; }
  document.title = stored + ' ' + why;
})();
</script>`)
	}))
	defer page.Close()
	profile, err := os.MkdirTemp("", "doxlab-bounded") // the user reaches it, as it does not t.TempDir's
	require.NoError(t, err)
	defer os.RemoveAll(profile)
	ctx, b := launch(t, browser.Options{User: u, UserDataDir: profile, StorageLimit: 128 << 20})
	l := b.Load(ctx, page.URL, 20*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, l.Error)
	var title string
	require.Eventually(t, func() bool {
		title, err = titleOf(ctx, b)
		return err == nil && strings.Contains(title, " ")
	}, time.Minute, 100*time.Millisecond)
	var stored int
	var why string
	_, err = fmt.Sscan(title, &stored, &why)
	require.NoError(t, err, title)
	require.Equal(t, "QuotaExceededError", why, title)
	require.Less(t, stored, 8, "at most 128 MiB stored: %s", title)
	var onDisk int64
	require.NoError(t, filepath.WalkDir(profile, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				onDisk += info.Size()
			}
		}
		return err
	}))
	require.Less(t, onDisk, int64(16<<20), "what the page stored reached the disk")
}

// TestMeasuredLoadBypassesServiceWorkers: a page whose warm-up registers
// a service worker that answers every request itself is fetched from the
// network again in the measured navigation after Reset, as a cold load
// is: the worker once answered it from its own cache, no request reached
// the server, and the load's timings measured no network and no DNS.
func TestMeasuredLoadBypassesServiceWorkers(t *testing.T) {
	testutil.NeedChromium(t)
	var docs atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sw.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `self.addEventListener('install', e => self.skipWaiting());
self.addEventListener('activate', e => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', e => e.respondWith(new Response('<!doctype html><title>the worker</title>', {headers: {'Content-Type': 'text/html'}})));`)
		case "/":
			docs.Add(1)
			fmt.Fprint(w, `<!doctype html><title>the network</title><script>navigator.serviceWorker.register('/sw.js').then(r => document.title = 'registered')</script>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer page.Close()
	ctx, b := launch(t, browser.Options{})
	l := b.Load(ctx, page.URL+"/", 20*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, l.Error)
	require.Eventually(t, func() bool {
		title, err := titleOf(ctx, b)
		return err == nil && title == "registered"
	}, 20*time.Second, 50*time.Millisecond, "the worker registered")
	require.NoError(t, b.Reset(ctx, false))
	l = b.Load(ctx, page.URL+"/", 20*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, l.Error)
	require.EqualValues(t, 2, docs.Load(), "the measured navigation reached the server")
	require.Equal(t, "http/1.1", l.Protocol)
}

// TestDialogsAreAnswered: a page that alerts, or asks to confirm, loads
// (its dialogs stalled it until its load timed out) and says how many it
// opened, and one that asks to stay when left does not keep the next
// navigation from going.
func TestDialogsAreAnswered(t *testing.T) {
	testutil.NeedChromium(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/alert":
			fmt.Fprint(w, `<!doctype html><title>alert</title><script>alert('one'); alert('two'); document.title = confirm('sure?') ? 'confirmed' : 'cancelled'</script>`)
		case "/stay":
			fmt.Fprint(w, `<!doctype html><title>stay</title><script>addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = 'stay'; })</script>`)
		default:
			fmt.Fprint(w, `<!doctype html><title>plain</title><p>plain`)
		}
	}))
	defer page.Close()
	ctx, b := launch(t, browser.Options{})
	l := b.Load(ctx, page.URL+"/alert", 10*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, l.Error)
	require.Equal(t, 3, l.Dialogs, "two alerts and a confirm, as the load says")
	title, err := titleOf(ctx, b)
	require.NoError(t, err)
	require.Equal(t, "cancelled", title)
	for _, p := range []string{"/stay", "/plain"} {
		l = b.Load(ctx, page.URL+p, 10*time.Second)
		require.Equal(t, browser.LoadOK, l.Status, "%s: %s", p, l.Error)
	}
	title, err = titleOf(ctx, b)
	require.NoError(t, err)
	require.Equal(t, "plain", title, "left the page that asked to stay")
}

// needBrowserUser is the page worker's browser user, which the test
// drops to from root, as a worker does.
func needBrowserUser(t *testing.T) string {
	t.Helper()
	testutil.NeedRoot(t, "the browser drops from root to its user")
	testutil.NeedChromium(t)
	const u = "doxlab-browser"
	if _, err := user.Lookup(u); err != nil {
		testutil.Missing(t, "no user "+u+" (useradd --system --user-group doxlab-browser, as scripts/install-peers.sh does)")
	}
	return u
}

// launch starts a browser for the test, closed when it ends, and a
// context of a minute for it.
func launch(t *testing.T, opts browser.Options) (context.Context, *browser.Browser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b, err := browser.Launch(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return ctx, b
}

// titleOf is the title of the page b shows.
func titleOf(ctx context.Context, b *browser.Browser) (string, error) {
	return browser.Get(ctx, b, 5*time.Second, chromedp.Evaluate[string]("document.title"))
}

package browser_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
)

// TestChromiumUsesECH loads a page of doxlab's web listener in Chromium
// with its DNS over doxlab's DoH in secure mode (browser.Options.SecureDNS:
// Chromium takes ECH configs from HTTPS records only over secure DNS),
// through a relay that keeps what the network sees. With web.ech on, the
// outer ClientHello names only the public name and the server records
// ECH accepted with the page's name inside; with it off, the same load
// sends the page's name in clear: the check can fail. With
// browser.Options.NoECH, Chromium sends only GREASE to a server with ECH.
func TestChromiumUsesECH(t *testing.T) {
	testutil.NeedChromium(t)
	for _, on := range []bool{true, false} {
		t.Run("ech="+strconv.FormatBool(on), func(t *testing.T) {
			recs, sent := chromiumECHLoad(t, on, false)
			var web []server.Record
			for _, r := range recs {
				if r.Kind == "conn" && r.Listener == "web-tcp" {
					web = append(web, r)
				}
			}
			require.NotEmpty(t, web, "the page came from the web listener")
			for _, r := range web {
				if on {
					require.Equal(t, ech.Accepted, r.ECH, "%+v", r)
					require.Equal(t, "public.test", r.OuterSNI)
					require.Equal(t, "page.test", r.SNI)
				} else {
					require.Empty(t, r.ECH, "a server without ECH does not look")
					require.Equal(t, "page.test", r.SNI)
				}
			}
			if on {
				require.True(t, bytes.Contains(sent, []byte("public.test")), "the outer ClientHello names the public name")
				require.False(t, bytes.Contains(sent, []byte("page.test")), "the page's name went in clear")
			} else {
				require.True(t, bytes.Contains(sent, []byte("page.test")), "without ECH the name is in clear")
			}
		})
	}

	t.Run("browser-off", func(t *testing.T) {
		recs, sent := chromiumECHLoad(t, true, true)
		n := 0
		for _, r := range recs {
			if r.Kind == "conn" && r.Listener == "web-tcp" {
				require.Equal(t, ech.GREASE, r.ECH, "%+v", r)
				require.Equal(t, "page.test", r.OuterSNI)
				n++
			}
		}
		require.Positive(t, n)
		require.True(t, bytes.Contains(sent, []byte("page.test")), "the name in clear")
	})
}

// chromiumECHLoad serves page.test (with or without ECH) and loads it in
// Chromium (its ECH off with noECH); it returns the server's records and
// the relay's capture.
func chromiumECHLoad(t *testing.T, on, noECH bool) ([]server.Record, []byte) {
	site := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(site, "index.html"), []byte("<!doctype html><title>ech</title><p>inner"), 0o644))
	webPort := testutil.FreePort(t)
	webAddr := "127.0.0.1:" + strconv.Itoa(webPort)
	w := testutil.Relay(t, webAddr)
	relayPort := w.Port()
	cfg := &server.Config{
		Listen: server.Listen{DoH: "127.0.0.1:0", Web: webAddr},
		TLS:    server.TLS{Names: []string{"page.test"}},
		Answers: server.Answers{Static: []string{
			"page.test. 60 IN A 127.0.0.1",
			// Off port 443 the record is the port-prefixed name's, with a target.
			"_" + relayPort + "._https.page.test. 60 IN HTTPS 1 page.test. alpn=h2",
		}},
		Web: server.Web{Roots: map[string]string{"page.test": site}, NoAltSvc: true},
	}
	if on {
		cfg.Web.ECH.PublicName = "public.test"
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	var mu sync.Mutex
	var recs []server.Record
	srv.OnRecord(func(r *server.Record) {
		mu.Lock()
		recs = append(recs, *r)
		mu.Unlock()
	})
	require.NoError(t, srv.Start())
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := browser.Launch(ctx, browser.Options{
		SecureDNS: "https://" + srv.Addr("doh").String() + "/dns-query",
		SPKI:      []string{srv.SPKI()},
		NoECH:     noECH,
	})
	require.NoError(t, err)
	defer b.Close()
	l := b.Load(ctx, "https://page.test:"+relayPort+"/", 30*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, "%s", l.Error)
	b.Close()
	srv.Settle(ctx)
	mu.Lock()
	defer mu.Unlock()
	return append([]server.Record(nil), recs...), w.FirstFlights()
}

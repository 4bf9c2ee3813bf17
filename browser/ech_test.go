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
			recs, sent, _ := chromiumECHLoad(t, on, false, false)
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
		recs, sent, _ := chromiumECHLoad(t, true, true, false)
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

// TestChromiumSendsNoNameInClearOverHTTP3: with the page's HTTPS record
// offering h3, Chromium opens QUIC connections with ECH, and what the
// network sees proves it: its Initial packets, decrypted as any observer
// can (their keys come from the connection ID they carry), hold a
// ClientHello whose server name is the public name, with an ECH
// extension, and the page's name nowhere. The server's HTTP/3 records
// say ECH was accepted: the public name outside, the page's inside.
// Without ECH on the server the same load's QUIC ClientHello names the
// page: the check can fail.
func TestChromiumSendsNoNameInClearOverHTTP3(t *testing.T) {
	testutil.NeedChromium(t)
	for _, on := range []bool{true, false} {
		t.Run("ech="+strconv.FormatBool(on), func(t *testing.T) {
			recs, sent, clients := chromiumECHLoad(t, on, false, true)
			quic := 0
			for _, r := range recs {
				if r.Kind == "conn" && r.Listener == "web" {
					require.Equal(t, "h3", r.Transport, "%+v", r)
					require.Equal(t, "page.test", r.SNI)
					if on {
						require.Equal(t, ech.Accepted, r.ECH, "%+v", r)
						require.Equal(t, "public.test", r.OuterSNI)
					} else {
						require.Empty(t, r.ECH)
					}
					quic++
				}
			}
			require.Positive(t, quic, "Chromium loaded the page over HTTP/3")
			require.NotEmpty(t, clients, "QUIC went through the relay")
			for _, datagrams := range clients {
				ch, err := testutil.ReadClientHello(datagrams)
				require.NoError(t, err)
				if !on {
					require.Equal(t, "page.test", ch.SNI, "without ECH the name is in clear")
					continue
				}
				require.Equal(t, "public.test", ch.SNI, "the outer ClientHello names the public name")
				require.True(t, ch.ECH)
				require.False(t, bytes.Contains(ch.Raw, []byte("page.test")), "the page's name went in clear over QUIC")
			}
			if on {
				require.False(t, bytes.Contains(sent, []byte("page.test")), "the page's name went in clear over TCP")
			}
		})
	}
}

// chromiumECHLoad serves page.test (with or without ECH) and loads it in
// Chromium (its ECH off with noECH; over HTTP/3 from its HTTPS record
// with h3); it returns the server's records, the TCP relay's capture and
// what each QUIC client sent through the UDP relay.
func chromiumECHLoad(t *testing.T, on, noECH, h3 bool) ([]server.Record, []byte, [][][]byte) {
	site := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(site, "index.html"), []byte("<!doctype html><title>ech</title><p>inner"), 0o644))
	webPort := testutil.FreePort(t)
	webAddr := "127.0.0.1:" + strconv.Itoa(webPort)
	port := testutil.FreePort(t) // free for TCP and UDP: QUIC is relayed on the same number
	w := testutil.RelayAt(t, port, webAddr)
	relayPort := w.Port()
	alpn := "h2"
	var udp *testutil.UDPWire
	if h3 {
		udp, alpn = testutil.RelayUDP(t, port, webAddr), "h3,h2"
	}
	cfg := &server.Config{
		Listen: server.Listen{DoH: "127.0.0.1:0", Web: webAddr},
		TLS:    server.TLS{Names: []string{"page.test"}},
		Answers: server.Answers{Static: []string{
			"page.test. 60 IN A 127.0.0.1",
			// Off port 443 the record is the port-prefixed name's, with a target.
			"_" + relayPort + "._https.page.test. 60 IN HTTPS 1 page.test. alpn=" + alpn,
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
	opts := browser.Options{
		SecureDNS: "https://" + srv.Addr("doh").String() + "/dns-query",
		SPKI:      []string{srv.SPKI()},
		NoECH:     noECH,
	}
	if h3 {
		// Chromium refuses QUIC to a certificate no public root issued,
		// its SPKI list notwithstanding, unless the origin is forced onto
		// QUIC: without this it closes the handshake with "certificate
		// unknown", ECH or none, and loads the page over HTTP/2. The ECH
		// config still comes from the HTTPS record over secure DNS.
		opts.ForceQUIC = []string{"page.test:" + relayPort}
	}
	b, err := browser.Launch(ctx, opts)
	require.NoError(t, err)
	defer b.Close()
	l := b.Load(ctx, "https://page.test:"+relayPort+"/", 30*time.Second)
	require.Equal(t, browser.LoadOK, l.Status, "%s", l.Error)
	b.Close()
	srv.Settle(ctx)
	mu.Lock()
	defer mu.Unlock()
	var clients [][][]byte
	if udp != nil {
		clients = udp.Clients()
	}
	return append([]server.Record(nil), recs...), w.FirstFlights(), clients
}

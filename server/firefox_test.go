package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/peertest"
	"github.com/doxlab/doxlab/server"
)

// TestFirefoxAndTheH2OriginFrame loads a page whose scripts and images
// come from three other origins on the same server and certificate in
// Firefox ESR over HTTP/2 (its DNS through TRR to doxlab's DoH listener,
// so every lookup is recorded), with and without the web listener's
// ORIGIN frame (RFC 8336). What Firefox does, as measured here: with the
// frame it sends all four origins' requests on the page's connection,
// without it it opens a connection per origin (4-6 connections: at
// times two to one origin, as a script and an image race its
// handshake), though all four resolve to one address; either way it resolves
// every origin (A, AAAA and HTTPS): the frame spares connections, not
// lookups.
func TestFirefoxAndTheH2OriginFrame(t *testing.T) {
	firefox := peertest.Need(t, "firefox-esr", "apt-get install firefox-esr")
	certutil := peertest.Need(t, "certutil", "apt-get install libnss3-tools")
	hosts := []string{"page.test", "a.test", "b.test", "c.test"}
	ca := peertest.NewCA(t, hosts...)
	site := t.TempDir()
	page := "<html><head><title>origins</title>"
	for _, h := range hosts[1:] {
		dir := filepath.Join(site, h)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "s.js"), []byte("window.x=1;"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "i.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`), 0o644))
		page += `<script src="https://` + h + `:PORT/s.js"></script><img src="https://` + h + `:PORT/i.svg">`
	}
	page += "</head><body>three other origins</body></html>"
	require.NoError(t, os.MkdirAll(filepath.Join(site, "page.test"), 0o755))
	webPort, dohPort := strconv.Itoa(peertest.FreePort(t)), strconv.Itoa(peertest.FreePort(t))
	require.NoError(t, os.WriteFile(filepath.Join(site, "page.test", "index.html"), []byte(strings.ReplaceAll(page, ":PORT/", ":"+webPort+"/")), 0o644))

	load := func(noOrigin bool) (lookups, conns int) {
		ts := start(t, func(c *server.Config) {
			c.Listen = server.Listen{Web: "127.0.0.1:" + webPort, DoH: "127.0.0.1:" + dohPort}
			c.TLS.Cert, c.TLS.Key = ca.CertFile, ca.KeyFile
			c.Web.Roots = map[string]string{}
			c.Answers.Static = nil
			for _, h := range hosts {
				c.Web.Roots[h] = filepath.Join(site, h)
				c.Answers.Static = append(c.Answers.Static, h+". 60 IN A 127.0.0.1")
			}
			c.Web.NoOrigin = noOrigin
		})
		prof := t.TempDir()
		out, err := exec.Command(certutil, "-N", "-d", "sql:"+prof, "--empty-password").CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(certutil, "-A", "-n", "doxlab", "-t", "C,,", "-i", ca.CAFile, "-d", "sql:"+prof).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.NoError(t, os.WriteFile(filepath.Join(prof, "user.js"), []byte(firefoxPrefs("https://127.0.0.1:"+dohPort+"/dns-query")), 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, firefox, "--headless", "--no-remote", "--profile", prof, "--screenshot", filepath.Join(prof, "shot.png"), "https://page.test:"+webPort+"/")
		cmd.Env = append(os.Environ(), "HOME="+prof, "MOZ_CRASHREPORTER_DISABLE=1")
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.FileExists(t, filepath.Join(prof, "shot.png"), "the page loaded")
		ts.Settle(context.Background())
		defer ts.Close() // the next load binds the same ports
		for _, r := range ts.records("query", "") {
			for _, h := range hosts {
				if r.QName == h+"." || r.QName == "_"+webPort+"._https."+h+"." {
					lookups++
				}
			}
		}
		for _, r := range ts.records("conn", "h2") {
			if r.Listener == "web-tcp" {
				conns++
			}
		}
		return lookups, conns
	}
	withLookups, withConns := load(false)
	withoutLookups, withoutConns := load(true)
	t.Logf("Firefox over HTTP/2, 4 origins on one server: with ORIGIN %d lookups, %d connections; without %d lookups, %d connections",
		withLookups, withConns, withoutLookups, withoutConns)
	require.Equal(t, 1, withConns, "with the frame, one connection carries every origin")
	require.GreaterOrEqual(t, withoutConns, len(hosts), "without it, a connection per origin at least (a second to one origin, at times, as requests race its handshake)")
	require.Equal(t, withoutLookups, withLookups, "Firefox resolves every origin either way")
	require.Equal(t, 3*len(hosts), withLookups, "A, AAAA and HTTPS per origin")
}

// firefoxPrefs keep Firefox to the page: DNS only over TRR to doh, no
// HTTP/3 (the frame under test is HTTP/2's), no prefetching, no
// speculative connections, none of its own services.
func firefoxPrefs(doh string) string {
	prefs := map[string]string{
		"network.trr.mode": "3", "network.trr.uri": `"` + doh + `"`, "network.trr.custom_uri": `"` + doh + `"`, "network.trr.confirmationNS": `"skip"`,
		"network.http.http3.enable": "false", "network.dns.disablePrefetch": "true", "network.prefetch-next": "false",
		"network.predictor.enabled": "false", "network.http.speculative-parallel-limit": "0",
		"browser.shell.checkDefaultBrowser": "false", "app.update.enabled": "false", "datareporting.policy.dataSubmissionEnabled": "false",
		"toolkit.telemetry.enabled": "false", "browser.startup.homepage_override.mstone": `"ignore"`, "network.captive-portal-service.enabled": "false",
		"network.connectivity-service.enabled": "false", "browser.safebrowsing.malware.enabled": "false", "browser.safebrowsing.phishing.enabled": "false",
		"extensions.update.enabled": "false",
	}
	s := ""
	for k, v := range prefs {
		s += `user_pref("` + k + `", ` + v + ");\n"
	}
	return s
}

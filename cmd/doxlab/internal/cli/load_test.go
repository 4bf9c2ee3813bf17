package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
)

// TestLoadCaptureAndReplay serves the corpus's Instagram-like page on
// loopback, captures its graph from Chromium with doxlab load --capture,
// and replays it with doxlab load over HTTP/3 in 0-RTT and over HTTP/2,
// DNS over UDP to doxlab's server: every resource loads, the script-made
// images hang off a script, and the warm HTTP/3 load is resumed in 0-RTT.
func TestLoadCaptureAndReplay(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		testutil.Missing(t, "chromium")
	}
	dir := t.TempDir()
	pages, err := corpus.Extract(dir)
	require.NoError(t, err)
	const host = "insta." + corpus.Domain
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0", Web: "127.0.0.1:0"}, TLS: server.TLS{Names: []string{host, "127.0.0.1"}},
		Web: server.Web{Roots: map[string]string{host: pages[2].Dir}}, Answers: server.Answers{Static: []string{host + ". 300 IN A 127.0.0.1"}}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, srv.CertPEM(), 0o644))
	_, port, _ := strings.Cut(srv.Addr("web").String(), ":")
	page := "https://" + host + ":" + port + "/"
	graph := filepath.Join(dir, "insta.json")

	if os.Geteuid() == 0 {
		// As root Chromium would run without its sandbox: it runs as the
		// browser's user, who must exist.
		code, _, errOut := run("load", "--capture", graph, "--browser-user", "no-such-user-doxlab", "--spki", srv.SPKI(), "--resolve", host+":127.0.0.1", page)
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `the browser's user "no-such-user-doxlab" does not exist`)
		require.Contains(t, errOut, "as root, Chromium runs as --browser-user no-such-user-doxlab, with its sandbox")
	}
	code, out, errOut := run("load", "--capture", graph, "--spki", srv.SPKI(), "--resolve", host+":127.0.0.1", page)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "16 resources from 1 hosts")
	g, err := pageload.ReadGraph(graph)
	require.NoError(t, err)
	for _, r := range g.Resources {
		if strings.Contains(r.URL, "/img/post") {
			require.Equal(t, "Script", g.Resources[r.Parent].Type, "%s: a script made it", r.URL)
		}
	}

	dns := "udp://" + srv.Addr("udp").String()
	// The resolver puts the page on loopback: refused, as a measured
	// resolver's answer may not lead there, unless loopback is opened.
	code, out, errOut = run("load", "--graph", graph, "--dns", dns, "--ca", ca, page)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, out, "the page's host "+host+" is at 127.0.0.1, in 127.0.0.0/8")
	require.Contains(t, errOut, "your testbed's or lab's own, add --allow-special 127.0.0.0/8\n", "the hint names the block")
	code, _, errOut = run("load", "--dns", dns, "--ca", ca, "--allow-special", "8.8.8.0/24", page)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--allow-special: 8.8.8.0/24 is not special-purpose")
	code, _, errOut = run("load", "--dns", dns, "--ca", ca, page)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "the page's host "+host+" is at 127.0.0.1", "without a graph too")
	require.Contains(t, errOut, "add --allow-special 127.0.0.0/8\n")
	// Printed, a replay stands beside the captured load, resource by resource.
	code, out, errOut = run("load", "--graph", graph, "--dns", dns, "--allow-special", "127.0.0.0/8", "--ca", ca, page)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("the captured load's PLT %.1f ms", g.PLTMs))
	require.Contains(t, out, "c.end")
	for _, r := range g.Resources {
		require.Contains(t, out, fmt.Sprintf("%7.1f %7.1f ", r.SentMs, r.EndMs), "%s's captured times", r.URL)
	}
	// Where the graph has a body's end on the wire, that is the end shown.
	wired := *g
	wired.Resources = slices.Clone(g.Resources)
	for i := range wired.Resources {
		wired.Resources[i].WireEndMs = wired.Resources[i].EndMs - 0.5
	}
	wiredPath := filepath.Join(dir, "insta-wire.json")
	require.NoError(t, pageload.WriteGraph(wiredPath, &wired))
	code, out, errOut = run("load", "--graph", wiredPath, "--dns", dns, "--allow-special", "127.0.0.0/8", "--ca", ca, page)
	require.Equal(t, 0, code, errOut)
	for _, r := range wired.Resources {
		require.Contains(t, out, fmt.Sprintf("%7.1f %7.1f ", r.SentMs, r.WireEndMs), "%s's end on the wire", r.URL)
	}
	code, out, errOut = run("load", "--graph", graph, "--dns", dns, "--allow-special", "127.0.0.0/8", "--ca", ca, "--0rtt", "--repeat", "2", "--json", page)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	var loads [2]pageload.Result
	for i, line := range lines {
		require.NoError(t, json.Unmarshal([]byte(line), &loads[i]))
		require.Equal(t, "ok", loads[i].Status)
		require.Len(t, loads[i].Resources, 16)
		require.Len(t, loads[i].Conns, 1)
		require.Equal(t, "udp", loads[i].Lookups[0].Transport)
	}
	require.False(t, loads[0].Conns[0].Resumed, "the first load is cold")
	require.True(t, loads[1].Conns[0].Used0RTT, "the second is in 0-RTT")

	// Coalesced: the lookup on a DNS stream of the page's own connection.
	// On loopback a busy machine may finish the handshake before the
	// client writes its lookup, which then leaves in 1-RTT (once, with
	// four test binaries beside it): through a relay that holds the
	// server's replies 30 ms, the handshake takes that long, and the warm
	// lookup has that long to leave in 0-RTT, as on a link.
	relay := testutil.DelayUDP(t, srv.Addr("web").String(), 30*time.Millisecond)
	_, rport, _ := strings.Cut(relay, ":")
	relayed := *g
	relayed.Resources = slices.Clone(g.Resources)
	for i := range relayed.Resources {
		relayed.Resources[i].URL = strings.Replace(relayed.Resources[i].URL, ":"+port+"/", ":"+rport+"/", 1)
	}
	relayedPath := filepath.Join(dir, "insta-relayed.json")
	require.NoError(t, pageload.WriteGraph(relayedPath, &relayed))
	code, out, errOut = run("load", "--graph", relayedPath, "--coalesce", "dnsstream", "--dns", "https://127.0.0.1:"+rport+"/", "--allow-special", "127.0.0.0/8", "--ca", ca, "--0rtt", "--repeat", "2", "--json", "https://"+host+":"+rport+"/")
	require.Equal(t, 0, code, errOut)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	for i, line := range lines {
		require.NoError(t, json.Unmarshal([]byte(line), &loads[i]))
		require.Equal(t, "ok", loads[i].Status)
		require.Len(t, loads[i].Conns, 1, "DNS and page on one connection")
		require.Equal(t, "dnsstream", loads[i].Lookups[0].Transport)
		require.Equal(t, i == 1, loads[i].Lookups[0].Early, "the warm load's lookup in 0-RTT")
	}
	code, _, errOut = run("load", "--coalesce", "doh3", "--dns", "https://resolver.example/", page)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "want the resolver's IP address")

	code, out, errOut = run("load", "--dns", dns, "--allow-special", "127.0.0.0/8", "--ca", ca, "--h2", page)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "10 resources named by the page's HTML")
	require.Contains(t, out, "ok h2 PLT")

	code, _, errOut = run("load", "--h2", "--0rtt", page)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "0-RTT needs h3")
	code, _, errOut = run("load", "http://x/")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "want an https:// URL")
}

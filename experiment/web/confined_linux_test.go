package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser/confine"
	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
)

// vantageLab is a vantage point of the test's own beside an "Internet"
// host that serves a hostile page and its resolver, and also holds a
// private network's host and a metadata service: canaries listen on
// each, and on the vantage point's loopback and own address.
type vantageLab struct {
	vantage, inet *testutil.Netns
	canaries      map[string]*atomic.Int32
	flooded       atomic.Int32 // queries the resolver got for the flood page's names
}

// The page tries every way into the vantage point's networks: literal
// addresses and names that resolve to them, images and fetch.
const hostilePage = `<!doctype html><title>hostile</title>
<img src="http://127.0.0.1:8081/lo.png"><img src="http://169.254.169.254/latest/meta-data/">
<img src="http://10.77.0.5/private.png"><img src="http://198.51.100.1:5432/own.png">
<img src="http://lo.test:8081/x.png"><img src="http://meta.test/latest/meta-data/"><img src="http://priv.test/x.png">
<script>fetch("http://127.0.0.1:8081/fetch", {mode: "no-cors"}).catch(() => {});</script>
<p>hello</p>`

// floodPage asks for 300 names, each a query the stub would forward to
// the resolver measured.
const floodPage = `<!doctype html><title>flood</title>
<script>for (let i = 0; i < 300; i++) { new Image().src = "http://f" + i + ".test/x.png"; }</script>
<p>flood</p>`

func newVantageLab(t *testing.T) *vantageLab {
	vantage := testutil.NewNetns(t, "dxt-vp")
	inet := testutil.NewNetns(t, "dxt-net")
	vantage.Link(inet, "up0", "198.51.100.1/24", "eth0", "198.51.100.10/24")
	inet.IP("-n", inet.Name, "addr", "add", "10.77.0.5/32", "dev", "lo")
	inet.IP("-n", inet.Name, "addr", "add", "169.254.169.254/32", "dev", "lo")
	vantage.IP("-n", vantage.Name, "route", "add", "10.77.0.0/24", "via", "198.51.100.10")
	vantage.IP("-n", vantage.Name, "route", "add", "169.254.169.254/32", "via", "198.51.100.10")
	lab := &vantageLab{vantage: vantage, inet: inet, canaries: map[string]*atomic.Int32{}}
	for _, c := range []struct {
		ns   *testutil.Netns
		addr string
	}{{vantage, "127.0.0.1:8081"}, {vantage, "0.0.0.0:5432"}, {inet, "10.77.0.5:80"}, {inet, "169.254.169.254:80"}} {
		hits := new(atomic.Int32)
		lab.canaries[c.addr] = hits
		var l net.Listener
		require.NoError(t, c.ns.Run(func() (err error) { l, err = net.Listen("tcp", c.addr); return err }))
		t.Cleanup(func() { l.Close() })
		go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	}
	// The Internet host: its web server and the resolver every load
	// goes through.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, hostilePage) })
	mux.HandleFunc("/flood", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, floodPage) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:8081/", http.StatusFound)
	})
	var l net.Listener
	require.NoError(t, inet.Run(func() (err error) { l, err = net.Listen("tcp", "198.51.100.10:80"); return err }))
	t.Cleanup(func() { l.Close() })
	go http.Serve(l, mux)
	zone := filepath.Join(t.TempDir(), "test.zone")
	require.NoError(t, os.WriteFile(zone, []byte(`$ORIGIN test.
@ 300 IN SOA ns.test. h.test. 1 60 60 60 60
page 300 IN A 198.51.100.10
lo 300 IN A 127.0.0.1
meta 300 IN A 169.254.169.254
priv 300 IN A 10.77.0.5
own 300 IN A 198.51.100.1
`), 0o644))
	srv, err := server.StartIn(&server.Config{Listen: server.Listen{UDP: "198.51.100.10:53", TCP: "198.51.100.10:53"},
		Answers: server.Answers{Zone: zone, Origin: "test."}}, inet.Run)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	srv.OnRecord(func(r *server.Record) {
		if r.Kind == "query" && strings.HasPrefix(r.QName, "f") {
			lab.flooded.Add(1)
		}
	})
	return lab
}

// run measures a page campaign with doxlab campaign run at the vantage
// point, and returns its loads by page, while checking every 200 ms that
// no renderer the campaign started runs as root.
// rootRendererUnder is the command line of a renderer running as root
// among the descendants of pid, or "".
func rootRendererUnder(pid int) string {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the last ")".
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		queue = append(queue, children[p]...)
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if bytes.Contains(cmdline, []byte("--type=renderer")) && bytes.Contains(status, []byte("\nUid:\t0\t")) {
			return strings.ReplaceAll(string(cmdline), "\x00", " ")
		}
	}
	return ""
}

func (lab *vantageLab) run(t *testing.T, bin, spec string) map[string]*WildLoad {
	db := filepath.Join(filepath.Dir(spec), strings.TrimSuffix(filepath.Base(spec), ".yaml")+".db")
	cmd := lab.vantage.Command(bin, "campaign", "run", spec, "--store", db)
	var outBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var rootRenderer string
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-time.After(200 * time.Millisecond):
			if line := rootRendererUnder(cmd.Process.Pid); line != "" {
				rootRenderer = line
			}
		}
	}
	require.NoError(t, err, "%s", outBuf.String())
	require.Empty(t, rootRenderer, "a renderer of the campaign's browser ran as root")
	var out []byte
	out, err = exec.Command(bin, "export", "--table", "results", "--kind", string(campaign.PageLoads), "--store", db).Output()
	require.NoError(t, err)
	loads := map[string]*WildLoad{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var row struct{ Record *campaign.PageLoad }
		require.NoError(t, json.Unmarshal(line, &row))
		var w WildLoad
		require.NoError(t, json.Unmarshal(row.Record.Load, &w))
		require.Equal(t, row.Record.Status, w.Status)
		loads[row.Record.Page] = &w
		t.Logf("%s: %s %s; refused %v", row.Record.Page, w.Status, w.Error, w.Refused)
	}
	return loads
}

// TestPageWorkerCannotReachTheVantage runs a page campaign, as root, at
// a vantage point of the test's own, over pages that try every way into
// the vantage point's networks: a page linking its loopback, its own
// address, a private host and the metadata service, by address and by
// names the measured resolver answers with such addresses, a page
// that redirects to loopback, and a page that asks for 300 names. No canary may see a connection; the
// browser must run as its own user, every renderer sandboxed; the loads
// must say what was refused. Opting the private network in must open it.
func TestPageWorkerCannotReachTheVantage(t *testing.T) {
	dir, bin := setup(t)
	testutil.Need(t, "nft", "apt-get install nftables")
	lab := newVantageLab(t)
	write := func(name, pages, allow string) string {
		p := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(`name: %s
targets: [198.51.100.10]
transports: [udp]
pages: {urls: [%s], timeout: 8s, queries: 60}
contact: https://lab.example/doxlab-test
allow_special: [%s]
`, name, pages, allow)), 0o644))
		return p
	}

	// A page named by a special-purpose address is refused when the
	// campaign is read.
	out, err := lab.vantage.Command(bin, "campaign", "run", write("literal", "http://169.254.169.254/latest/meta-data/", "198.51.100.0/24"), "--store", filepath.Join(dir, "l.db")).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "169.254.169.254 is in 169.254.0.0/16, link-local")

	loads := lab.run(t, bin, write("hostile", "http://page.test/, http://page.test/redirect, http://lo.test:8081/, http://meta.test/, http://priv.test/, http://own.test:5432/, http://page.test/flood", "198.51.100.0/24"))
	for addr, hits := range lab.canaries {
		require.Zero(t, hits.Load(), "canary %s was reached", addr)
	}
	page := loads["http://page.test/"]
	require.NotNil(t, page)
	require.Equal(t, "ok", page.Status, page.Error)
	var refused []string
	for _, r := range page.Refused {
		refused = append(refused, fmt.Sprintf("%s:%d/%s", r.Addr, r.Port, r.Proto))
	}
	for _, want := range []string{"127.0.0.1:8081/tcp", "169.254.169.254:80/tcp", "10.77.0.5:80/tcp", "198.51.100.1:5432/tcp"} {
		require.Contains(t, refused, want, "the page's literal subresources, refused and recorded")
	}
	blockedNames := map[string]bool{}
	for _, r := range page.Stub {
		if r.Reason == string(server.ReasonBlocked) {
			blockedNames[r.QName] = true
		}
	}
	for _, name := range []string{"lo.test.", "meta.test.", "priv.test."} {
		require.True(t, blockedNames[name], "the resolver's answer for %s refused by the stub", name)
	}
	require.NotNil(t, page.Confinement)
	require.NoError(t, page.Confinement.Holds())
	require.Equal(t, campaign.DefaultBrowserUser, page.Confinement.User)
	for _, p := range []string{"http://page.test/redirect", "http://lo.test:8081/", "http://meta.test/", "http://priv.test/", "http://own.test:5432/"} {
		require.NotNil(t, loads[p], p)
		require.Equal(t, statusBlocked, loads[p].Status, "%s: %s", p, loads[p].Error)
		require.Zero(t, loads[p].OverQueries, p)
	}
	// The page that asks for 300 names sent its resolver no more than
	// its task's 60 queries; the rest were refused by the stub, counted,
	// and the load stored as blocked.
	flood := loads["http://page.test/flood"]
	require.NotNil(t, flood)
	require.Equal(t, statusBlocked, flood.Status, flood.Error)
	require.Contains(t, flood.Error, "more than 60 DNS queries")
	require.Positive(t, flood.OverQueries)
	t.Logf("the flood page's task: %d queries of its names reached the resolver, %d refused by the stub", lab.flooded.Load(), flood.OverQueries)
	require.LessOrEqual(t, lab.flooded.Load(), int32(60), "queries for the flood's names the resolver got")
	require.Positive(t, lab.flooded.Load())

	// Opted in, the private network is reached, by name and by address.
	loads = lab.run(t, bin, write("optin", "http://priv.test/", "198.51.100.0/24, 10.77.0.0/24"))
	require.Equal(t, "ok", loads["http://priv.test/"].Status, loads["http://priv.test/"].Error)
	require.Positive(t, lab.canaries["10.77.0.5:80"].Load())
	for addr, hits := range lab.canaries {
		if addr != "10.77.0.5:80" {
			require.Zero(t, hits.Load(), "canary %s was reached", addr)
		}
	}
	require.False(t, slices.ContainsFunc(loads["http://priv.test/"].Refused, func(r confine.Refusal) bool { return r.Addr == "10.77.0.5" }))
}

// TestCheckPages: the check doxlab worker --check --pages runs on a
// vantage point that has what page loads need: every finding holds, the
// last one from a confined browser really started.
func TestCheckPages(t *testing.T) {
	setup(t)
	testutil.Need(t, "nft", "apt-get install nftables")
	var fs []campaign.Finding
	ns := testutil.NewNetns(t, "dxt-check")
	require.NoError(t, ns.Run(func() error { fs = checkPages(campaign.PageLoaderConfig{}); return nil }))
	for _, f := range fs {
		t.Logf("%v %s: %s", f.OK, f.Check, f.Detail)
		require.True(t, f.OK, "%s: %s", f.Check, f.Detail)
	}
	require.Equal(t, "sandbox", fs[len(fs)-1].Check)
	require.Contains(t, fs[len(fs)-1].Detail, "Chromium ran as doxlab-browser, no process as root")
	fs = checkPages(campaign.PageLoaderConfig{BrowserUser: "no-such-user-doxlab"})
	require.False(t, allOK(fs), "a missing user fails the check")
}

package web

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// internet is an emulated Internet for page-load campaigns: vantage
// hosts behind access links, recursive resolvers of four implementations
// at their distances forwarding to an authoritative host, web hosts
// serving the corpus pages under their own names, and PostgreSQL in a
// host of its own.
type internet struct {
	tb        *testbed.Testbed
	pg        *testutil.Postgres
	pages     []corpus.Page
	targets   []string // the spec's targets
	noDoQ     []string // those that speak no DoQ (Unbound and Knot Resolver as Debian builds them)
	resolvers map[string]*resolverLog
	spki      []string
	vantages  []string
}

// resolverLog holds a doxlab resolver's query records.
type resolverLog struct {
	ip   string
	recs server.RecordLog
}

// wildVantages are the vantage hosts and their access links.
var wildVantages = map[string]string{"fra": "fiber", "nyc": "cable"}

func startInternet(t *testing.T, pageNames []string) *internet {
	all, err := corpus.Extract(filepath.Join(t.TempDir(), "pages"))
	require.NoError(t, err)
	chosen, err := corpus.Select(all, pageNames)
	require.NoError(t, err)
	place := pages.DefaultPlacement
	webHosts := place.Hosts(chosen)
	resolvers := []string{"retry", "far", "coredns", "unbound", "kresd", "down"}
	hosts := append([]string{"db", "server"}, webHosts...)
	hosts = append(hosts, resolvers...)
	var vantages []string
	for _, v := range slices.Sorted(maps.Keys(wildVantages)) {
		hosts = append(hosts, v)
		vantages = append(vantages, v)
	}
	tb, err := testbed.Start(testbed.Spec{Name: "wild", Hosts: hosts, HostProfiles: wildVantages})
	require.NoError(t, err)
	t.Cleanup(func() { tb.Close() })
	require.NoError(t, place.Apply(experiment.OnTestbed(tb), webHosts))
	// Resolvers at their distances beyond the vantage points' links.
	for host, d := range map[string]time.Duration{"retry": 10 * time.Millisecond, "far": 60 * time.Millisecond, "coredns": 20 * time.Millisecond,
		"unbound": 5 * time.Millisecond, "kresd": 30 * time.Millisecond, "down": 5 * time.Millisecond} {
		_, err := experiment.SetDistance(experiment.OnTestbed(tb), host, d)
		require.NoError(t, err)
	}
	in := &internet{tb: tb, pages: chosen, resolvers: map[string]*resolverLog{}, vantages: vantages}
	in.pg = testutil.NewPostgres(t, tb.IPs["db"], func(argv ...string) *exec.Cmd { return tb.Command("db", argv...) })

	// The authoritative host ("server") answers for every page's names
	// and serves the one-origin pages; the others serve theirs.
	srvs, err := pages.StartPageServers(experiment.OnTestbed(tb), pages.PageServers(experiment.OnTestbed(tb).IP, chosen, false, place))
	require.NoError(t, err)
	t.Cleanup(srvs.Close)
	in.spki = srvs.SPKIs()
	auth := tb.IPs["server"]

	// doxlab's resolver twice: one far away that is an ODoH target too,
	// one that always sends Retry (as the paper's DoQ servers did) and
	// relays ODoH to the far one (its proxy); both cache what they
	// forward, and keep their records.
	targetRoots := x509.NewCertPool()
	for _, name := range []string{"far", "retry"} {
		ip := tb.IPs[name]
		cfg := &server.Config{Listen: server.Listen{UDP: ip + ":53", TCP: ip + ":53", DoT: ip + ":853", DoQ: ip + ":853", DoH: ip + ":443", DoH3: ip + ":443"},
			Answers: server.Answers{Forward: "udp://" + auth + ":53", Cache: true, ForwardOpenSockets: func(f func() error) error { return tb.Run(name, f) }}}
		if name == "far" {
			cfg.ODoH = server.ODoH{Target: true}
		} else {
			cfg.QUIC.Retry = "always"
			cfg.ODoH = server.ODoH{Proxy: true, ProxyTargets: []string{tb.IPs["far"]}, ProxyRoots: targetRoots,
				ProxyOpenSockets: func(f func() error) error { return tb.Run(name, f) }}
		}
		srv, err := server.StartIn(cfg, func(f func() error) error { return tb.Run(name, f) })
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		targetRoots.AppendCertsFromPEM(srv.CertPEM())
		l := &resolverLog{ip: ip}
		srv.OnRecord(func(r *server.Record) {
			if r.Kind == "query" {
				l.recs.Add(r)
			}
		})
		in.resolvers[name] = l
		in.targets = append(in.targets, ip)
	}
	dir := t.TempDir()
	cert := testutil.NewCert(t)
	// CoreDNS: forward and cache, every protocol.
	if bin, err := exec.LookPath("coredns"); err == nil || fileExists(os.Getenv("HOME")+"/go/bin/coredns") {
		if bin == "" {
			bin = os.Getenv("HOME") + "/go/bin/coredns"
		}
		ip := tb.IPs["coredns"]
		cf := filepath.Join(dir, "Corefile")
		require.NoError(t, os.WriteFile(cf, []byte(fmt.Sprintf(`dns://.:53 tls://.:853 https://.:443 quic://.:853 {
  bind %s
  tls %s %s
  forward . %s
  cache 300
}
`, ip, cert.CertFile, cert.KeyFile, auth)), 0o644))
		startIn(t, tb, "coredns", bin, "-conf", cf)
		in.targets = append(in.targets, ip)
	} else {
		t.Log("no CoreDNS (go install github.com/coredns/coredns@v1.15.0): left out")
	}
	// Unbound: forwarding, Do53 and DoH/2 (Debian's has no DoQ: its DoQ
	// tasks fail, refused, as against any resolver that lacks it).
	if bin, err := exec.LookPath("unbound"); err == nil {
		ip := tb.IPs["unbound"]
		conf := filepath.Join(dir, "unbound.conf")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`server:
  verbosity: 0
  username: ""
  chroot: ""
  directory: "%[1]s"
  pidfile: "%[1]s/unbound.pid"
  use-syslog: no
  do-daemonize: no
  interface: %[2]s@53
  interface: %[2]s@443
  https-port: 443
  http-endpoint: "/dns-query"
  tls-service-key: "%[3]s"
  tls-service-pem: "%[4]s"
  access-control: 0.0.0.0/0 allow
  do-not-query-localhost: no
  domain-insecure: "test."
  local-zone: "test." nodefault
  module-config: "iterator"
forward-zone:
  name: "."
  forward-addr: %[5]s
remote-control:
  control-enable: no
`, dir, ip, cert.KeyFile, cert.CertFile, auth)), 0o644))
		startIn(t, tb, "unbound", bin, "-d", "-c", conf)
		in.targets = append(in.targets, ip) // its DoQ is refused: a sample of a resolver that lacks it
		in.noDoQ = append(in.noDoQ, ip)
	}
	// Knot Resolver: forwarding, Do53 and DoH/2 (no DoQ either).
	if bin, err := exec.LookPath("kresd"); err == nil {
		ip := tb.IPs["kresd"]
		kdir := filepath.Join(dir, "kresd")
		require.NoError(t, os.MkdirAll(kdir, 0o755))
		conf := filepath.Join(kdir, "config.lua")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`net.listen('%[1]s', 53, { kind = 'dns' })
net.listen('%[1]s', 443, { kind = 'doh2' })
net.tls('%[2]s', '%[3]s')
trust_anchors.remove('.')
cache.open(10 * MB, 'lmdb://%[4]s/cache')
policy.add(policy.all(policy.FORWARD('%[5]s')))
`, ip, cert.CertFile, cert.KeyFile, kdir, auth)), 0o644))
		startIn(t, tb, "kresd", bin, "-n", "-c", conf, kdir)
		in.targets = append(in.targets, ip)
		in.noDoQ = append(in.noDoQ, ip)
	}
	for _, target := range in.targets {
		var err error
		for range 50 {
			if err = tb.Run("fra", func() error { return dnsUp(hostOf(target)) }); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, err, "resolver %s", target)
	}
	// One that is down: its host answers, nothing listens.
	in.targets = append(in.targets, tb.IPs["down"])
	return in
}

func hostOf(target string) string {
	if i := strings.Index(target, "://"); i >= 0 {
		target = target[i+3:]
	}
	host, _, _ := strings.Cut(target, ":")
	host, _, _ = strings.Cut(host, "/")
	return host
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startIn runs a program in a testbed host until the test ends.
func startIn(t *testing.T, tb *testbed.Testbed, host string, argv ...string) {
	cmd := tb.Command(host, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s: %s", host, out.String())
		}
	})
}

// dnsUp asks a resolver for a page's name over UDP.
func dnsUp(ip string) error {
	c, err := net.Dial("udp", ip+":53")
	if err != nil {
		return err
	}
	defer c.Close()
	q := new(dns.Msg)
	q.SetQuestion("www.example.doxlab.test.", dns.TypeA)
	dc := &dns.Conn{Conn: c}
	c.SetDeadline(time.Now().Add(time.Second))
	if err := dc.WriteMsg(q); err != nil {
		return err
	}
	_, err = dc.ReadMsg()
	return err
}

// TestPageCampaignOnEmulatedInternet runs a page-load campaign the way
// the IMC 2022 study ran its own, on the emulated Internet: two vantage
// points on different links, each with a worker process (one killed
// and replaced, as a supervisor would), six resolvers, the paper's three
// protocols, PostgreSQL restarted mid-run. (A third vantage point
// checked nothing the second does not, and made this CI's slowest test:
// 108 Chromium loads on two cores, 99 s. So did a second round: a
// plan's rounds are its tasks', whatever they measure, and
// TestCampaignInRounds's; here it doubled the loads, to 72.) Then every
// task must be stored exactly once; each load's lookups must have gone
// through its own vantage point's stub to its resolver over its
// protocol; and the warm-up must have filled the resolver's cache, so
// that the measured navigation's lookups are cache hits there.
//
// DOXLAB_WILD_PAGES (default wiki) names the corpus pages: "example,
// wiki,insta,o1,o5" are the issue's (180 loads); DOXLAB_WILD_REPORT, a
// directory, keeps the run's report and its loads (campaign-loads.jsonl,
// which TestWildSectionFromExport draws again).
func TestPageCampaignOnEmulatedInternet(t *testing.T) {
	dir, bin := setup(t)
	pageNames := strings.Split(cmpOr(os.Getenv("DOXLAB_WILD_PAGES"), "wiki"), ",")
	in := startInternet(t, pageNames)
	var urls []string
	for _, p := range in.pages {
		urls = append(urls, "https://"+p.Host+"/")
	}
	spec := filepath.Join(dir, "wild.yaml")
	targets, _ := json.Marshal(in.targets)
	pageList, _ := json.Marshal(urls)
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`name: wild
targets: %s
transports: [udp, doh2, doq]
tls: {insecure: true}
pages: {urls: %s, timeout: 10s}
contact: https://lab.example/doxlab-test
allow_special: [10.200.0.0/24]
vantages:
  - {name: fra, location: "Frankfurt, DE"}
  - {name: nyc, location: "New York, US"}
`, targets, pageList)), 0o644))
	out, err := in.tb.Command("db", bin, "campaign", "plan", spec, "--store", in.pg.URL).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("%s", out)

	workers := testutil.NewWorkers(t)
	// A worker killed is replaced under its ID, as a supervisor restarts
	// a unit, and the replacement takes back the job the killed one held
	// at once: waiting out --rescue-after and River's rescuer's 30 s tick
	// was the run's last minute.
	start := func(v string) {
		workers.Start(v, in.tb.Command(v, bin, "worker", "--vantage", v, "--id", v+"/1", "--store", in.pg.URL, "--concurrency", "1", "--drain", "--quiet",
			"--browser-flag", "ignore-certificate-errors-spki-list="+strings.Join(in.spki, ",")))
	}
	began := time.Now()
	for _, v := range in.vantages {
		start(v)
	}
	// Mid-run: a worker killed (and replaced) and the database restarted.
	time.Sleep(12 * time.Second)
	if _, _, ok := workers.Kill("nyc", nil); ok {
		t.Logf("%.0fs: killed nyc's worker", time.Since(began).Seconds())
		start("nyc")
	}
	time.Sleep(5 * time.Second)
	in.pg.Restart(time.Second)
	t.Logf("%.0fs: restarted PostgreSQL", time.Since(began).Seconds())
	if !workers.Wait(20 * time.Minute) {
		t.Fatal("the workers did not drain the queues in time")
	}
	t.Logf("%.0fs: every worker drained its queue", time.Since(began).Seconds())

	// The store is read from the database's host, through doxlab.
	out, err = in.tb.Command("db", bin, "campaign", "status", "--json", "--store", in.pg.URL).Output()
	require.NoError(t, err)
	var status campaign.Status
	require.NoError(t, json.Unmarshal(out, &status))
	out, err = in.tb.Command("db", bin, "export", "--table", "results", "--kind", string(campaign.PageLoads), "--run", status.Run, "--store", in.pg.URL).Output()
	require.NoError(t, err)
	if dir := os.Getenv("DOXLAB_WILD_REPORT"); dir != "" {
		// The report of the run, to look at.
		out, err := in.tb.Command("db", bin, "report", "--store", in.pg.URL, "--out", dir).CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = in.tb.Command("db", bin, "export", "--table", "results", "--kind", string(campaign.PageLoads), "--store", in.pg.URL).Output()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "campaign-loads.jsonl"), out, 0o644))
		t.Logf("report in %s", dir)
	}
	var loads []*campaign.PageLoad
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var row struct{ Record *campaign.PageLoad }
		require.NoError(t, json.Unmarshal(line, &row))
		loads = append(loads, row.Record)
	}
	perVantage := len(in.targets) * 3 * len(urls)
	require.Len(t, loads, len(in.vantages)*perVantage, "every task stored")
	out, err = in.tb.Command("db", bin, "export", "--table", "campaign-loads", "--run", status.Run, "--store", in.pg.URL).Output()
	require.NoError(t, err)
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+len(in.vantages)*perVantage, "the flat export holds each load once")
	keys := map[string]bool{}
	ok := map[string]int{}
	for _, v := range status.Vantages {
		require.Equal(t, perVantage, v.Stored, v.Vantage)
		require.Zero(t, v.Waiting+v.Running+v.Failed, "%+v", v)
	}
	summary := map[string]int{}
	for _, x := range loads {
		summary[fmt.Sprintf("%-28s %-5s %s", x.Target, x.Transport, x.Status)]++
		if x.Status != "ok" {
			var w WildLoad
			json.Unmarshal(x.Load, &w)
			for _, r := range append(w.WarmStub, w.Stub...) {
				if r.Upstream != nil && r.Upstream.Status != "ok" {
					t.Logf("%s: %s %s: upstream %s %s", x.Key(), r.QName, r.QType, r.Upstream.Status, r.Upstream.Error)
					break
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(summary)) {
		t.Logf("%s: %d", k, summary[k])
	}
	for _, x := range loads {
		require.False(t, keys[x.Key()], "%s stored twice", x.Key())
		keys[x.Key()] = true
		var w WildLoad
		require.NoError(t, json.Unmarshal(x.Load, &w))
		require.Contains(t, w.UserAgent, "(+https://lab.example/doxlab-test)")
		if hostOf(x.Target) == in.tb.IPs["down"] || (x.Transport == "doq" && slices.Contains(in.noDoQ, x.Target)) {
			require.NotEqual(t, "ok", x.Status, "%s: a load through a resolver that is down", x.Key())
			continue
		}
		require.Equal(t, "ok", x.Status, "%s: %s", x.Key(), x.Error)
		require.NotNil(t, w.Confinement, x.Key())
		require.NoError(t, w.Confinement.Holds(), "%s: the browser ran confined", x.Key())
		ok[x.Vantage.Name]++
		// Every lookup through this vantage point's stub, to its resolver,
		// over its protocol.
		require.NotEmpty(t, w.Stub, x.Key())
		for _, r := range w.Stub {
			require.NotNil(t, r.Upstream, "%s: %s answered by the stub itself", x.Key(), r.QName)
			require.Equal(t, x.URL, r.Upstream.URL, x.Key())
			require.Equal(t, x.Transport, r.Upstream.Protocol, x.Key())
			require.True(t, r.Upstream.Status.HasResponse(), "%s: %s %s: %s %s", x.Key(), r.QName, r.QType, r.Upstream.Status, r.Upstream.Error)
			require.True(t, strings.HasPrefix(r.Upstream.Conn.LocalAddr, in.tb.IPs[x.Vantage.Name]+":"), "%s: from %s", x.Key(), r.Upstream.Conn.LocalAddr)
		}
		if x.Transport == "doq" && hostOf(x.Target) == in.tb.IPs["retry"] {
			require.True(t, w.Stub[0].Upstream.Conn.Retry || w.Stub[0].Upstream.Conn.TokenUsed, "%s: the Retry resolver's DoQ: Retry, or the warm-up's token", x.Key())
		}
		// The warm-up filled the cache: at doxlab's resolvers, the
		// measured navigation's lookups from this vantage point were
		// answered from the cache.
		for name, l := range in.resolvers {
			if hostOf(x.Target) != l.ip {
				continue
			}
			from, to := w.Load.Start, w.Load.Start.Add(time.Duration((w.Load.WallMs+1000)*float64(time.Millisecond)))
			page := map[string]bool{} // the page's names (not the browser's own background lookups)
			for _, r := range w.DNS {
				page[r.QName] = true
			}
			seen := 0
			for _, r := range l.recs.Since(0) {
				if r.Time.Before(from) || r.Time.After(to) || !strings.HasPrefix(r.Remote, in.tb.IPs[x.Vantage.Name]+":") || !page[r.QName] {
					continue
				}
				seen++
				if r.Upstream != nil {
					require.True(t, expired(l.recs.Since(0), r), "%s: %s %s at %s was not a cache hit", x.Key(), r.QName, r.QType, name)
				}
			}
			require.Positive(t, seen, "%s: %s saw none of the measured navigation's lookups", x.Key(), name)
		}
	}
	t.Logf("ok loads per vantage point: %v; %d loads in %.0f s", ok, len(loads), time.Since(began).Seconds())
	logRates(t, loads)

	// The same method on one machine: doxlab campaign run, into SQLite,
	// with a resolver named oblivious too: ODoH through the retry host
	// (the proxy) to the far one (the target).
	oblivious := fmt.Sprintf("odoh://%s/dns-query?target=%s/dns-query", in.tb.IPs["retry"], in.tb.IPs["far"])
	here := filepath.Join(dir, "here.yaml")
	require.NoError(t, os.WriteFile(here, []byte(fmt.Sprintf("name: here\ntargets: [%s, %q]\ntransports: [udp, doh2, doq, odoh]\ntls: {insecure: true}\npages: {urls: %s, timeout: 10s}\ncontact: https://lab.example/doxlab-test\nallow_special: [10.200.0.0/24]\n",
		in.tb.IPs["coredns"], oblivious, pageList)), 0o644))
	db := filepath.Join(dir, "here.db")
	flag := "--browser-flag=ignore-certificate-errors-spki-list=" + strings.Join(in.spki, ",")
	farMark := in.resolvers["far"].recs.Mark()
	out, err = in.tb.Command("fra", bin, "campaign", "run", here, "--store", db, flag).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), fmt.Sprintf("%d page loads measured and stored", 4*len(urls)), "three protocols of CoreDNS, ODoH of far")
	require.Contains(t, string(out), ", 0 failed")
	// The target answered the oblivious lookups without seeing who asked:
	// every query it took from here came from its proxy's address.
	fromProxy := 0
	for _, r := range in.resolvers["far"].recs.Since(farMark) {
		require.False(t, strings.HasPrefix(r.Remote, in.tb.IPs["fra"]+":"), "the target saw the client: %s %s from %s", r.QName, r.QType, r.Remote)
		if strings.HasPrefix(r.Remote, in.tb.IPs["retry"]+":") {
			fromProxy++
		}
	}
	require.Positive(t, fromProxy, "the page's lookups reached the target through its proxy")
	out, err = in.tb.Command("fra", bin, "campaign", "run", here, "--store", db, flag).CombinedOutput()
	require.Error(t, err, "a complete run is not measured again unasked")
	require.Contains(t, string(out), "is complete")
	out, err = in.tb.Command("fra", bin, "campaign", "status", "--json", "--store", db).Output()
	require.NoError(t, err, "a page campaign measured here has a status too")
	var hs campaign.Status
	require.NoError(t, json.Unmarshal(out, &hs))
	require.Len(t, hs.Vantages, 1)
	require.Equal(t, campaign.HereVantage, hs.Vantages[0].Vantage)
	require.Equal(t, 4*len(urls), hs.Vantages[0].Planned)
	require.Equal(t, 4*len(urls), hs.Vantages[0].Stored)
	out, err = in.tb.Command("fra", bin, "report", "--store", db, "--out", filepath.Join(dir, "report")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), fmt.Sprintf("%d page loads", 4*len(urls)))
	page, err := os.ReadFile(filepath.Join(dir, "report", "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), "names from the network, the client from the resolver", "the campaign overview names ODoH's rung")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// logRates prints each vantage point's measured loads a minute: from
// its first task's warm-up to its last measured load's end, every task
// (failed ones too) in between. Rounds overlap once the next is due, so
// the whole run is the span.
func logRates(t *testing.T, loads []*campaign.PageLoad) {
	type span struct {
		first, last time.Time
		n           int
	}
	spans := map[string]*span{}
	for _, x := range loads {
		var w WildLoad
		if json.Unmarshal(x.Load, &w) != nil || w.WarmUp == nil {
			continue
		}
		end := w.WarmUp.Start.Add(time.Duration(w.WarmUp.WallMs * float64(time.Millisecond)))
		if w.Load != nil {
			end = w.Load.Start.Add(time.Duration(w.Load.WallMs * float64(time.Millisecond)))
		}
		sp := spans[x.Vantage.Name]
		if sp == nil {
			sp = &span{first: w.WarmUp.Start, last: end}
			spans[x.Vantage.Name] = sp
		}
		if w.WarmUp.Start.Before(sp.first) {
			sp.first = w.WarmUp.Start
		}
		if end.After(sp.last) {
			sp.last = end
		}
		sp.n++
	}
	for _, v := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[v]
		t.Logf("vantage %s (%s): %d page loads in %.1f s: %.1f measured loads a minute", v, wildVantages[v], sp.n, sp.last.Sub(sp.first).Seconds(), float64(sp.n)/sp.last.Sub(sp.first).Minutes())
	}
}

// expired says whether a lookup the resolver forwarded (a cache miss)
// found its cache entry expired: the resolver's last fetch of the name
// and type was at least its TTL before. A warm-up that fell just before
// an entry's TTL ran out leaves the measured navigation a miss.
func expired(recs []*server.Record, miss *server.Record) bool {
	var last *server.Record
	for _, r := range recs {
		if r != miss && r.Upstream != nil && r.QName == miss.QName && r.QType == miss.QType && r.Time.Before(miss.Time) {
			last = r
		}
	}
	if last == nil {
		return false // never fetched before: the warm-up did not fill it
	}
	ttl := time.Duration(math.MaxInt64)
	for _, a := range last.Upstream.Answers {
		if f := strings.Fields(a); len(f) > 1 {
			if s, err := strconv.Atoi(f[1]); err == nil {
				ttl = min(ttl, time.Duration(s)*time.Second)
			}
		}
	}
	return miss.Time.Sub(last.Time) >= ttl
}

// TestWildSectionFromExport draws the campaigns' section from an export
// of their loads (DOXLAB_WILD_JSONL, as TestPageCampaignOnEmulatedInternet
// keeps one) into DOXLAB_WILD_OUT: to look at the figures again without
// measuring again; with DOXLAB_WILD_STORE, into a store for doxlab report.
func TestWildSectionFromExport(t *testing.T) {
	path := os.Getenv("DOXLAB_WILD_JSONL")
	if path == "" {
		t.Skip("DOXLAB_WILD_JSONL names an export of campaign loads")
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var w Wild
	var loads []*wildLoad
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var row struct {
			RunID  string          `json:"run_id"`
			Record json.RawMessage `json:"record"`
		}
		require.NoError(t, json.Unmarshal(line, &row))
		x, err := decodeWild(row.RunID, row.Record, false)
		require.NoError(t, err)
		w, loads = append(w, pointOfWild(x)), append(loads, x)
	}
	if db := os.Getenv("DOXLAB_WILD_STORE"); db != "" {
		// The loads into a store of their own, for doxlab report.
		ctx := context.Background()
		st, err := store.Open(ctx, db)
		require.NoError(t, err)
		defer st.Close()
		run := store.NewRun(campaign.Kind, "", map[string]string{"from": path})
		require.NoError(t, st.BeginRun(ctx, run))
		for _, x := range loads {
			require.NoError(t, st.WriteResult(ctx, run.ID, campaign.PageLoads, x.Key(), x.Start, x.PageLoad))
		}
	}
	s, err := w.Section(cmpOr(os.Getenv("DOXLAB_WILD_OUT"), t.TempDir()))
	require.NoError(t, err)
	require.NoError(t, w.WriteTable(testWriter{t}))
	for _, f := range experiment.Earn(w.Findings(), experiment.Evidence{}) {
		t.Logf("%s: %s (%s) %s %s", f.Claim, f.Verdict, f.Here, f.Why, f.Reason)
	}
	t.Logf("%d figures' files", len(s.Files))
}

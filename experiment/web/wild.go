package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
)

// A campaign's page loads are this experiment's method taken out of the
// testbed: real pages, real resolvers, the machine's own network.
func init() { campaign.RegisterPageLoader(newWildLoader) }

// WildLoad is a campaign's page load as the loader records it: the web
// experiment's sample (browser timings, per-origin facts, the stub's
// records of the page's names), and every query the stub answered during
// each navigation, with its upstream exchange (resumed, 0-RTT, Retry,
// QUIC version, DoQ ALPN): the raw record of what the resolver did.
type WildLoad struct {
	*pages.Sample
	Stub     []*server.Record `json:"stub_records"`
	WarmStub []*server.Record `json:"warm_up_stub_records,omitempty"`
	// UserAgent is what the browser sent, the campaign's contact in it.
	UserAgent string `json:"user_agent,omitempty"`
}

// wildLoader loads pages with Chromium whose DNS goes to a stub of
// doxlab's own on a loopback address of this machine (127.53.0.N:53):
// the browser runs in a mount namespace where resolv.conf names the
// stub and hosts knows only localhost, so nothing else resolves for it;
// the stub, started per task in this process, forwards to the task's
// resolver over the task's protocol.
type wildLoader struct {
	cfg  campaign.PageLoaderConfig
	dir  string // the namespace's resolv.conf, hosts, nsswitch.conf
	addr string // the stub's address
	b    *browser.Browser
	ua   string // the User-Agent suffix b was started with
}

func newWildLoader(cfg campaign.PageLoaderConfig) (campaign.PageLoader, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("page loads need root: the browser's resolv.conf is bound in a mount namespace of its own, and the stub listens on port 53 of a loopback address")
	}
	if _, err := browser.FindExec(cfg.Browser); err != nil {
		return nil, err
	}
	addr, err := freeStubAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "doxlab-pages")
	if err != nil {
		return nil, err
	}
	files := map[string]string{
		// One try, no search list: a lookup the stub fails is the
		// sample's, not retried elsewhere.
		"resolv.conf":   "nameserver " + addr + "\noptions timeout:10 attempts:1\n",
		"hosts":         "127.0.0.1 localhost\n::1 localhost\n",
		"nsswitch.conf": "hosts: files dns\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return &wildLoader{cfg: cfg, dir: dir, addr: addr}, nil
}

// freeStubAddr is the first of 127.53.0.1-254 whose port 53 is free on
// UDP and TCP: not 127.0.0.1, where a machine's own resolver may listen.
func freeStubAddr() (string, error) {
	for n := 1; n < 255; n++ {
		a := fmt.Sprintf("127.53.0.%d", n)
		u, err := net.ListenPacket("udp", a+":53")
		if err != nil {
			continue
		}
		tl, err := net.Listen("tcp", a+":53")
		u.Close()
		if err != nil {
			continue
		}
		tl.Close()
		return a, nil
	}
	return "", fmt.Errorf("no free port 53 on 127.53.0.1-254 for the stub (the page loader needs root)")
}

// browser starts Chromium for a contact, or keeps the one running.
func (l *wildLoader) browser(ctx context.Context, contact string) (*browser.Browser, error) {
	ua := "doxlab-measurement (+" + contact + ")"
	if l.b != nil && l.ua == ua {
		return l.b, nil
	}
	if l.b != nil {
		l.b.Close()
		l.b = nil
	}
	etc := map[string]string{}
	for _, n := range []string{"resolv.conf", "hosts", "nsswitch.conf"} {
		etc[n] = filepath.Join(l.dir, n)
	}
	b, err := browser.Launch(ctx, browser.Options{Exec: l.cfg.Browser, Etc: etc, UserAgentSuffix: ua, Flags: l.cfg.BrowserFlags})
	if err != nil {
		return nil, err
	}
	l.b, l.ua = b, ua
	return b, nil
}

// Load is one task: a stub forwarding to the task's resolver, a warm-up
// navigation (the resolver's cache, and the stub's ticket, token and
// QUIC version), the browser's caches cleared and its tickets dropped,
// the measured navigation.
func (l *wildLoader) Load(ctx context.Context, t measure.Task, o campaign.PageOptions) (*campaign.PageLoad, error) {
	b, err := l.browser(ctx, o.Contact)
	if err != nil {
		return nil, err
	}
	conn := o.Stub
	if conn == "reuse" {
		conn = "" // the forwarder's default: one connection for all
	}
	cfg := &server.Config{Listen: server.Listen{UDP: l.addr + ":53", TCP: l.addr + ":53"},
		Answers: server.Answers{Forward: t.URL, ForwardConn: conn, ForwardTimeout: 10 * time.Second,
			ForwardRoots: o.Upstream.RootCAs, ForwardInsecure: o.Upstream.Insecure, ForwardSNI: o.Upstream.SNI, ForwardRefuse: o.Upstream.Refuse}}
	stub, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("the stub: %w", err)
	}
	var recs experiment.RecordLog
	stub.OnRecord(func(r *server.Record) {
		if r.Kind == "query" {
			recs.Add(r)
		}
	})
	if err := stub.Start(); err != nil {
		return nil, fmt.Errorf("the stub: %w", err)
	}
	defer stub.Close()
	task := pages.Task{Page: t.Page, Transport: t.Transport, StubState: o.Stub, DNSMode: "stub", Rep: t.Rep}
	out := func(x *WildLoad) (*campaign.PageLoad, error) {
		x.UserAgent = b.UserAgent()
		raw, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return &campaign.PageLoad{Task: t, Start: x.Start, Status: x.Status, Error: x.Error, Load: raw}, nil
	}
	if err := b.Reset(ctx, true); err != nil {
		return nil, err
	}
	warm := b.Load(ctx, t.Page, o.Timeout)
	warmRecs := recs.Since(0)
	if err := b.Reset(ctx, true); err != nil {
		return nil, err
	}
	if warm.Status != browser.LoadOK {
		x := &pages.Sample{Task: task, Start: warm.Start, Status: "warm-up-failed", Error: fmt.Sprintf("warm-up: %s %s", warm.Status, warm.Error), WarmUp: warm}
		return out(&WildLoad{Sample: x, WarmStub: warmRecs})
	}
	mark := recs.Mark()
	ld := b.Load(ctx, t.Page, o.Timeout)
	stubRecs := recs.Since(mark)
	x := pages.Assemble(task, ld, pageHosts(t.Page, ld), stubRecs, nil)
	x.WarmUp = warm
	return out(&WildLoad{Sample: x, Stub: stubRecs, WarmStub: warmRecs})
}

// pageHosts are the hosts a load touched, the page's own first: a real
// page's origins are known only once it has loaded.
func pageHosts(page string, l *browser.Load) []string {
	var hosts []string
	add := func(raw string) {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			if h := strings.ToLower(u.Hostname()); !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	add(page)
	for _, r := range l.Resources {
		add(r.Name)
	}
	return hosts
}

func (l *wildLoader) Close() error {
	if l.b != nil {
		l.b.Close()
		l.b = nil
	}
	return os.RemoveAll(l.dir)
}

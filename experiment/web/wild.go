package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/browser/confine"
	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/miekg/dns"
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
	// Refused are the destinations the browser's firewall refused during
	// the measured navigation (WarmRefused: the warm-up's), and
	// RefusedPackets how many packets it refused on the way: where the
	// page tried to lead the browser that the campaign does not allow.
	Refused        []confine.Refusal `json:"refused_connections,omitempty"`
	WarmRefused    []confine.Refusal `json:"warm_up_refused_connections,omitempty"`
	RefusedPackets int               `json:"refused_packets,omitempty"`
	// OverQueries is how many DNS queries of the page's the stub refused
	// past the task's bound (campaign.PageOptions.Queries), over the
	// warm-up and the load: counted, not recorded, since a page past it
	// asks as fast as the stub refuses.
	OverQueries int64 `json:"over_queries,omitempty"`
	// Confinement is what the browser's processes were once the page
	// had loaded: their user, and the renderers' sandbox.
	Confinement *browser.Confinement `json:"confinement,omitempty"`
}

// wildLoader loads pages with Chromium kept from the vantage point: the
// browser runs as an unprivileged user with its sandbox on, in a network
// namespace of its own (confine.Net) whose firewall lets it reach the
// stub's port 53 and the public Internet, and refuses, at once and on
// the record, the campaign's blocklist, the vantage point's own addresses
// and every special-purpose block the campaign does not allow. Its
// resolv.conf (bound over /etc in a mount namespace of its own) names
// the stub, and its hosts file only localhost, so nothing else resolves
// for it. The stub, started per task in this process, forwards to the
// task's resolver over the task's protocol and refuses any answer that
// holds an address the policy refuses.
type wildLoader struct {
	cfg  campaign.PageLoaderConfig
	user string
	net  *confine.Net
	dir  string            // holds etc's files
	etc  map[string]string // the browser's resolv.conf, hosts, nsswitch.conf (stubEtc)
	b    *browser.Browser
	ua   string // the User-Agent suffix b was started with
}

func newWildLoader(cfg campaign.PageLoaderConfig) (campaign.PageLoader, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("page loads need Linux: the browser is confined with network and mount namespaces and nftables")
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("page loads need root: the browser gets a network namespace and firewall of its own, and root hands it to an unprivileged user")
	}
	if _, err := browser.FindExec(cfg.Browser); err != nil {
		return nil, err
	}
	name := cmp.Or(cfg.BrowserUser, campaign.DefaultBrowserUser)
	if _, err := user.Lookup(name); err != nil {
		return nil, fmt.Errorf("page loads run the browser as %q, which does not exist: create it (useradd --system --user-group --no-create-home --shell /usr/sbin/nologin %[1]s) or name another user", name)
	}
	// Nothing but the stub until a task brings its campaign's policy.
	cn, err := confine.New(&blocklist.Policy{})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "doxlab-pages")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		cn.Close()
		return nil, err
	}
	etc, err := stubEtc(dir, cn.Stub.String())
	if err != nil {
		cn.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &wildLoader{cfg: cfg, user: name, net: cn, dir: dir, etc: etc}, nil
}

// browser starts Chromium for a contact, or keeps the one running. A
// browser whose processes are not confined is not used.
func (l *wildLoader) browser(ctx context.Context, contact string) (*browser.Browser, error) {
	ua := "doxlab-measurement (+" + contact + ")"
	if l.b != nil && l.ua == ua {
		return l.b, nil
	}
	if l.b != nil {
		l.b.Close()
		l.b = nil
	}
	b, err := browser.Launch(ctx, browser.Options{Exec: l.cfg.Browser, Etc: l.etc, NetNS: l.net.NS, User: l.user,
		UserAgentSuffix: ua, Flags: l.cfg.BrowserFlags})
	if err != nil {
		return nil, err
	}
	if err := confined(b); err != nil {
		b.Close()
		return nil, err
	}
	l.b, l.ua = b, ua
	return b, nil
}

// confined is nil if b's processes run as no root and its renderers are
// sandboxed, as a page worker's must.
func confined(b *browser.Browser) error {
	c, err := b.Confinement()
	if err == nil {
		err = c.Holds()
	}
	if err != nil {
		return fmt.Errorf("the browser is not confined, so it loads no page: %w", err)
	}
	return nil
}

// Load is one task: a stub forwarding to the task's resolver, a warm-up
// navigation (the resolver's cache, and the stub's ticket, token and
// QUIC version), the browser's caches cleared and its tickets dropped,
// the measured navigation.
func (l *wildLoader) Load(ctx context.Context, t measure.Task, o campaign.PageOptions) (*campaign.PageLoad, error) {
	if err := l.net.SetPolicy(o.Policy); err != nil {
		return nil, err
	}
	b, err := l.browser(ctx, o.Contact)
	if err != nil {
		return nil, err
	}
	task := pages.Task{Page: t.Page, Transport: t.Transport, StubState: o.Stub, DNSMode: "stub", Rep: t.Rep}
	out := func(x *WildLoad) (*campaign.PageLoad, error) {
		x.UserAgent = b.UserAgent()
		raw, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		pl := &campaign.PageLoad{Task: t, Start: x.Start, Status: x.Status, Error: x.Error, Load: raw}
		if x.Status == "ok" {
			pl.PLTMs, pl.FCPMs = x.PLTMs, x.FCPMs
		}
		return pl, nil
	}
	if err := pageRefused(t.Page, o.Policy); err != nil {
		return out(&WildLoad{Sample: &pages.Sample{Task: task, Start: time.Now(), Status: statusBlocked, Error: err.Error()}})
	}
	conn := o.Stub
	if conn == "reuse" {
		conn = "" // the forwarder's default: one connection for all
	}
	stubAddr := net.JoinHostPort(l.net.Stub.String(), "53")
	cfg := &server.Config{Listen: server.Listen{UDP: stubAddr, TCP: stubAddr},
		Answers: server.Answers{Forward: t.URL, ForwardConn: conn, ForwardTimeout: 10 * time.Second, ForwardBudget: cmp.Or(o.Queries, measure.DefaultPageQueries),
			ForwardRoots: o.Upstream.RootCAs, ForwardInsecure: o.Upstream.Insecure, ForwardSNI: o.Upstream.SNI, ForwardRefuse: o.Upstream.Refuse}}
	stub, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("the stub: %w", err)
	}
	var recs server.RecordLog
	var over atomic.Int64
	stub.OnRecord(func(r *server.Record) {
		switch {
		case r.Kind != "query":
		case r.Reason == string(server.ReasonForwardBudget):
			over.Add(1)
		default:
			recs.Add(r)
		}
	})
	if err := stub.Start(); err != nil {
		return nil, fmt.Errorf("the stub: %w", err)
	}
	defer stub.Close()
	if err := b.Reset(ctx, true); err != nil {
		return nil, err
	}
	if _, _, err := l.net.Refused(); err != nil { // the reset's, and anything before
		return nil, err
	}
	warm := b.Load(ctx, t.Page, o.Timeout)
	warmRecs := recs.Since(0)
	warmRefused, warmPackets, err := l.net.Refused()
	if err != nil {
		return nil, err
	}
	if err := b.Reset(ctx, true); err != nil {
		return nil, err
	}
	if warm.Status != browser.LoadOK {
		x := &pages.Sample{Task: task, Start: warm.Start, Status: "warm-up-failed", Error: fmt.Sprintf("warm-up: %s %s", warm.Status, warm.Error), WarmUp: warm}
		if why := blockedLoad(t.Page, warm, warmRecs, warmRefused); why != "" {
			x.Status, x.Error = statusBlocked, "warm-up: "+why
		}
		if n := over.Load(); n > 0 {
			x.Status, x.Error = statusBlocked, "warm-up: "+overQueries(cfg.Answers.ForwardBudget, n)
		}
		return out(&WildLoad{Sample: x, WarmStub: warmRecs, WarmRefused: warmRefused, RefusedPackets: warmPackets, OverQueries: over.Load()})
	}
	if _, _, err := l.net.Refused(); err != nil { // the reset's
		return nil, err
	}
	mark := recs.Mark()
	ld := b.Load(ctx, t.Page, o.Timeout)
	stubRecs := recs.Since(mark)
	refused, packets, err := l.net.Refused()
	if err != nil {
		return nil, err
	}
	c, err := b.Confinement()
	if err == nil {
		err = c.Holds()
	}
	if err != nil {
		return nil, fmt.Errorf("the browser is not confined: %w", err) // the loader is broken: started again
	}
	x := pages.Assemble(task, ld, pageHosts(t.Page, ld), stubRecs, nil)
	x.WarmUp = warm
	if why := blockedLoad(t.Page, ld, stubRecs, refused); why != "" {
		x.Status, x.Error = statusBlocked, why
	}
	n := over.Load()
	if n > 0 {
		x.Status, x.Error = statusBlocked, overQueries(cfg.Answers.ForwardBudget, n)
	}
	return out(&WildLoad{Sample: x, Stub: stubRecs, WarmStub: warmRecs, Refused: refused, WarmRefused: warmRefused,
		RefusedPackets: warmPackets + packets, Confinement: &c, OverQueries: n})
}

// overQueries says why a load past its bound on DNS queries is blocked:
// what it measured is not the page's, since the stub refused some of
// its lookups.
func overQueries(bound int, over int64) string {
	return fmt.Sprintf("the page asked the stub more than %d DNS queries over its warm-up and load (pages.queries); %d past them were refused", bound, over)
}

// statusBlocked is a load the campaign's policy stopped: its page names
// a refused address, its resolver answered one, or the browser was led to
// one and the navigation failed on it.
const statusBlocked = "blocked"

// pageRefused is why a page whose host is an address the policy refuses
// is not loaded at all, or nil.
func pageRefused(page string, p *blocklist.Policy) error {
	u, err := url.Parse(page)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		return p.Check(a)
	}
	return nil
}

// blockedLoad says why a navigation counts as blocked, or "": the stub
// refused the page's own name (its answer held a refused address), or the
// navigation failed while the firewall refused connections.
func blockedLoad(page string, l *browser.Load, recs []*server.Record, refused []confine.Refusal) string {
	if u, err := url.Parse(page); err == nil {
		host := dns.Fqdn(strings.ToLower(u.Hostname()))
		for _, r := range recs {
			if r.Reason == string(server.ReasonBlocked) && strings.EqualFold(r.QName, host) {
				return fmt.Sprintf("the resolver's answer for %s %s holds an address the campaign does not allow", r.QName, r.QType)
			}
		}
	}
	if l.Status != browser.LoadOK && len(refused) > 0 {
		var to []string
		for _, r := range refused {
			to = append(to, fmt.Sprintf("%s:%d/%s", r.Addr, r.Port, r.Proto))
		}
		return fmt.Sprintf("%s %s, with connections refused to %s", l.Status, l.Error, strings.Join(to, ", "))
	}
	return ""
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
	return errors.Join(l.net.Close(), os.RemoveAll(l.dir))
}

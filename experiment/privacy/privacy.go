// Package privacy is the privacy experiment: what each rung of the
// privacy ladder (DoUDP, DoH, DoQ, ECH, Oblivious DoH) adds to a lookup
// and to a web handshake, on emulated access links (docs/privacy.md).
package privacy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// Privacy measures the ladder on each access profile. DNS: one lookup
// per sample over DoUDP, DoH, DoQ and ODoH (through a proxy host at
// ProxyRTT from both the client and the target), on a new connection
// (fresh), with what resumes it (TLS tickets; DoQ's 0-RTT), and on a
// connection kept open (reused: the query path alone). Web: a page's
// HTTP/3 handshake and first response with the site's name in clear,
// with ECH on a current config, and with a stale one (rejected, then the
// retry configs), each proven by the server's record of what ECH did.
// Page: doxlab's page loader fetches a page over HTTP/3, its lookups over
// each DNS rung with or without ECH on the page's connection: the
// ladder's cost on a page load, up to ODoH + ECH.
type Privacy struct {
	Profiles []string // access profiles; default Table II's
	// ProxyRTT is the ODoH proxy host's own link: the client reaches it
	// through its access link and then this, the target through this.
	ProxyRTT time.Duration
	Repeat   int // samples per cell; default 10
	// Browser is the Chromium the browser part runs; default the one on
	// PATH. NoBrowser leaves the part out.
	Browser   string
	NoBrowser bool
	experiment.Env

	own []netip.Prefix // the net's block, opened to the page loader
}

func init() {
	experiment.Register(experiment.Info{Name: "privacy", Method: 1,
		Measures:   "the privacy ladder: lookups over DoUDP, DoH, DoQ and Oblivious DoH via a proxy host, and a page's HTTP/3 handshake in clear, with ECH and with ECH retried",
		Reproduces: "Singanamalla et al., PETS 2021 (ODoH); RFC 9849 (ECH)",
		Resumable:  true, Quick: "fiber only, 10 samples a cell",
		Doc: "the privacy ladder: lookups over DoUDP, DoH, DoQ and Oblivious\nDoH (via a proxy host), fresh, resumed and reused, and a page's\nHTTP/3 handshake in clear, with ECH and with ECH retried",
		New: func() experiment.Experiment { return new(Privacy) }})
}

// Quick is a run of under a minute: fiber, and enough samples a cell
// for a median's interval.
func (c *Privacy) Quick() {
	c.Profiles = []string{"fiber"}
	c.Repeat = 10
}

// Flags binds privacy's flags.
func (c *Privacy) Flags(fs *flag.FlagSet) {
	c.defaults()
	experiment.ListVar(fs, &c.Profiles, "profiles", c.Profiles, "access profiles")
	fs.DurationVar(&c.ProxyRTT, "proxy-rtt", c.ProxyRTT, "the ODoH proxy host's own link RTT")
	experiment.CountVar(fs, &c.Repeat, "repeat", "`N` samples per cell")
	fs.StringVar(&c.Browser, "browser", c.Browser, "the Chromium binary of the browser part (default: chromium on PATH)")
	fs.BoolVar(&c.NoBrowser, "no-browser", c.NoBrowser, "leave out the browser part")
}

func (c *Privacy) defaults() {
	if len(c.Profiles) == 0 {
		c.Profiles = append([]string(nil), testbed.TableII...)
	}
	if c.ProxyRTT == 0 {
		c.ProxyRTT = 10 * time.Millisecond
	}
	if c.Repeat <= 0 {
		c.Repeat = 10
	}
	c.Env.Defaults()
}

// Kind is a Sample in the store.
var Kind = store.NewKind("privacy")

// The web rungs.
const (
	Clear    = "clear"     // the site's name in the ClientHello (Go's client GREASEs ECH)
	ECH      = "ech"       // ECH with the config the HTTPS record gives
	ECHStale = "ech-stale" // ECH with a config the server no longer holds: rejected, retried
)

// Sample is one lookup (Part "dns") or one web handshake (Part "web").
type Sample struct {
	Profile    string  `json:"profile"`
	Part       string  `json:"part"`      // dns, web, page or browser
	Rung       string  `json:"rung"`      // dns: udp, doh2, doq, odoh; web: clear, ech, ech-stale; page: DNS+clear or DNS+ech
	Condition  string  `json:"condition"` // dns: fresh, resumed, 0rtt, reused; web: fresh, 0rtt; browser: fresh; page: warm (the DNS connection kept, the page's new)
	Rep        int     `json:"rep"`
	RTTMs      float64 `json:"rtt_ms"`       // the client's access RTT
	ProxyRTTMs float64 `json:"proxy_rtt_ms"` // the proxy host's link RTT

	Status   string               `json:"status"`
	Error    string               `json:"error,omitempty"`
	Ms       float64              `json:"ms"`               // dns: the lookup's total; web: dial to the response's last octet; page, browser: PLT
	FCPMs    float64              `json:"fcp_ms,omitempty"` // browser: first contentful paint
	RTTs     float64              `json:"rtts"`             // Ms in multiples of RTTMs
	Bytes    transport.Counts     `json:"bytes"`            // at the client's socket (dns)
	Resumed  bool                 `json:"resumed,omitempty"`
	Used0RTT bool                 `json:"used_0rtt,omitempty"`
	ODoH     *transport.ODoHFacts `json:"odoh,omitempty"`
	// What the web server recorded of the handshakes: ECH per connection
	// (accepted, rejected, grease) and the outer name the network saw.
	ECH      []string `json:"ech,omitempty"`
	OuterSNI string   `json:"outer_sni,omitempty"`
	Retried  bool     `json:"retried,omitempty"` // the stale config was rejected and the retry configs used
	// LookupMs is the page's lookups, start of the first to end of the
	// last (page only).
	LookupMs float64 `json:"lookup_ms,omitempty"`
}

func (s *Sample) key() string {
	return fmt.Sprintf("%s|%s|%s|%d", s.Part, s.Rung, s.Condition, s.Rep)
}

// dnsCells are the DNS rungs and their conditions, in the ladder's order.
var dnsCells = []rungCond{
	{protocol.UDP, "fresh"},
	{protocol.DoH2, "fresh"}, {protocol.DoH2, "resumed"}, {protocol.DoH2, "reused"},
	{protocol.DoQ, "fresh"}, {protocol.DoQ, "0rtt"}, {protocol.DoQ, "reused"},
	{protocol.ODoH, "fresh"}, {protocol.ODoH, "resumed"}, {protocol.ODoH, "reused"},
}

// webCells are the web handshakes' rungs and conditions: a new
// connection (fresh), and one resumed in 0-RTT with the request sent
// early (the stale config has no resumption to offer).
var webCells = []rungCond{{Clear, "fresh"}, {ECH, "fresh"}, {ECHStale, "fresh"}, {Clear, "0rtt"}, {ECH, "0rtt"}}

// pageRungs are the page loads' rungs: the page's DNS, and whether its
// connection uses the ECH config of the page's HTTPS record. Coalesced
// is the top of the ladder for one server: the lookups on the page's own
// HTTP/3 connection (DNS streams) under ECH, so the network sees one
// connection to the public name and nothing else.
var pageRungs = []dnsECH{{protocol.UDP, false}, {protocol.DoH2, false}, {protocol.DoH2, true}, {protocol.DoQ, true}, {protocol.ODoH, true}, {Coalesced, true}}

// Coalesced is the page rung whose lookups ride on the page's connection
// (pageload.Coalesce, DNS streams): its ECH config is the one a browser
// would remember from an earlier visit, since the connection is opened
// before any lookup of the load.
const Coalesced = "coalesced"

// browserRungs are Chromium's: its DNS over DoH in secure mode (the only
// way it uses ECH), with ECH off (its preference) or on.
var browserRungs = []dnsECH{{protocol.DoH2, false}, {protocol.DoH2, true}}

// rungCond is a rung under a condition (the dns and web parts).
type rungCond struct{ rung, cond string }

// dnsECH is a rung of the page and browser parts: the page's DNS, and
// whether its connection uses ECH.
type dnsECH struct {
	dns string
	ech bool
}

// rung is its name in samples: DNS+clear or DNS+ech.
func (d dnsECH) rung() string { return pageRung(d.dns, d.ech) }

func pageRung(dns string, withECH bool) string {
	if withECH {
		return dns + "+" + ECH
	}
	return dns + "+" + Clear
}

const (
	site       = "page.test"
	publicName = "public.test"
	webPort    = 8443
)

// Run runs the experiment and returns its ID.
func (c *Privacy) Run(ctx context.Context) (string, error) {
	c.defaults()
	var profiles []testbed.Profile
	for _, name := range c.Profiles {
		p, err := testbed.LookupProfile(name)
		if err != nil {
			return "", experiment.BadDesign(err)
		}
		profiles = append(profiles, p)
	}
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "priv", Hosts: []string{"client", "server", "proxy"}})
	if err != nil {
		return "", err
	}
	defer closeAll()
	asked := c.ProxyRTT
	if c.ProxyRTT, err = experiment.SetDistance(tb, "proxy", asked); err != nil {
		return "", err
	}
	if c.ProxyRTT != asked {
		fmt.Fprintf(c.Log, "privacy: the proxy's link is not emulated on the %s net (proxy RTT %s)\n", tb.Kind(), c.ProxyRTT)
	}
	dir, err := os.MkdirTemp("", "doxlab-privacy")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	graph, err := writePage(dir)
	if err != nil {
		return "", err
	}
	ip, proxyIP := tb.IP("server"), tb.IP("proxy")
	c.own = experiment.OwnBlock(tb, "server")
	var web server.RecordLog
	target, err := experiment.StartServer(tb, &server.Config{
		Listen: server.Listen{UDP: ip + ":53", DoH: ip + ":443", DoQ: ip + ":853", Web: fmt.Sprintf("%s:%d", ip, webPort)},
		TLS:    server.TLS{Names: []string{site, ip}},
		Answers: server.Answers{Any: "192.0.2.1", Static: []string{
			fmt.Sprintf("_%d._https.%s. 60 IN HTTPS 1 %s. alpn=h3", webPort, site, site), site + ". 60 IN A " + ip,
			// doxlab's loader asks the name's own record (on any port).
			fmt.Sprintf("%s. 60 IN HTTPS 1 . alpn=h3 ipv4hint=%s", site, ip)}},
		Web:  server.Web{Roots: map[string]string{site: dir}, NoAltSvc: true, ECH: server.ECH{PublicName: publicName}},
		ODoH: server.ODoH{Target: true},
	})
	if err != nil {
		return "", err
	}
	defer target.Close()
	target.OnRecord(web.Add)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(target.CertPEM())
	proxy, err := experiment.StartServerIn(tb, "proxy", &server.Config{Listen: server.Listen{DoH: proxyIP + ":443"}, TLS: server.TLS{Names: []string{proxyIP}},
		ODoH: server.ODoH{Proxy: true, ProxyTargets: []string{ip}, ProxyRoots: roots,
			ProxyOpenSockets: func(f func() error) error { return tb.Run("proxy", f) }}})
	if err != nil {
		return "", err
	}
	defer proxy.Close()
	roots.AppendCertsFromPEM(proxy.CertPEM())

	urls := map[string]string{
		protocol.UDP:  "udp://" + ip + ":53",
		protocol.DoH2: "https://" + ip + ":443/dns-query",
		protocol.DoQ:  "quic://" + ip + ":853",
		protocol.ODoH: "odoh://" + proxyIP + ":443/dns-query?target=" + ip + ":443/dns-query",
	}
	expID, err := c.ExperimentID("privacy")
	if err != nil {
		return "", err
	}
	spec := map[string]any{"proxy_rtt_ms": ms(c.ProxyRTT), "repeat": c.Repeat, "dns": dnsCells, "web": webCells, "page": pageRungs, "urls": urls}
	browsers := len(browserRungs)
	if c.NoBrowser {
		browsers = 0
	} else {
		if _, err := browser.FindExec(c.Browser); err != nil {
			return "", fmt.Errorf("privacy: the browser part: %w (or --no-browser)", err)
		}
		spec["browser"] = browserRungs
	}
	open := func(f func() error) error { return tb.Run("client", f) }
	return expID, c.EachProfile(ctx, st, tb, expID, "experiment:privacy", profiles, spec, func(p testbed.Profile, runID string) error {
		done, err := st.ResultsDone(ctx, runID, Kind)
		if err != nil {
			return err
		}
		c.Plan((len(dnsCells) + len(webCells) + len(pageRungs) + browsers) * c.Repeat)
		base := Sample{Profile: p.Name, RTTMs: ms(p.RTT()), ProxyRTTMs: ms(c.ProxyRTT)}
		save := func(s *Sample) error {
			if s.RTTMs > 0 {
				s.RTTs = s.Ms / s.RTTMs
			}
			c.Advance(1)
			return st.WriteResult(ctx, runID, Kind, s.key(), time.Now(), s)
		}
		for _, cell := range dnsCells {
			if err := c.lookups(ctx, urls[cell.rung], cell.rung, cell.cond, roots, open, base, done, save); err != nil {
				return err
			}
		}
		// The config a browser would get, from the HTTPS record over DoH.
		list, err := echConfig(ctx, urls[protocol.DoH2], roots, open)
		if err != nil {
			return err
		}
		stale, err := ech.NewKey(publicName, nil) // a key the server never had
		if err != nil {
			return err
		}
		for _, cell := range webCells {
			cfg := map[string][]byte{Clear: nil, ECH: list, ECHStale: ech.ConfigList(stale.Config)}[cell.rung]
			addr := fmt.Sprintf("%s:%d", ip, webPort)
			var tickets tls.ClientSessionCache
			if cell.cond == "0rtt" { // a first connection, unmeasured, for the ticket
				tickets = tls.NewLRUClientSessionCache(4)
				c.handshake(ctx, addr, cfg, roots, open, tickets, false, &Sample{})
			}
			for rep := range c.Repeat {
				s := base
				s.Part, s.Rung, s.Condition, s.Rep = "web", cell.rung, cell.cond, rep
				if done[s.key()] {
					c.Advance(1)
					continue
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				mark := web.Mark()
				port := c.handshake(ctx, addr, cfg, roots, open, tickets, tickets != nil, &s)
				target.Settle(ctx)
				webFacts(&s, served(ctx, &web, mark, port, s.conns()))
				if err := save(&s); err != nil {
					return err
				}
			}
		}
		for _, pr := range pageRungs {
			if err := c.pages(ctx, pageTarget(urls, pr.dns, ip), pr.dns, pr.ech, list, graph, roots, open, base, done, save); err != nil {
				return err
			}
		}
		for _, br := range browserRungs[:browsers] {
			if err := c.browserLoads(ctx, tb, br.ech, target, &web, base, done, save); err != nil {
				return err
			}
		}
		fmt.Fprintf(c.Log, "privacy %s: %d lookups, %d web handshakes, %d page loads, %d in Chromium\n", p.Name, len(dnsCells)*c.Repeat, len(webCells)*c.Repeat, len(pageRungs)*c.Repeat, browsers*c.Repeat)
		return nil
	})
}

// lookups measures Repeat lookups of one rung under one condition: a
// warm-up first where the condition carries state (a ticket, an open
// connection, ODoH's target config), then the samples.
func (c *Privacy) lookups(ctx context.Context, url, rung, cond string, roots *x509.CertPool, open func(func() error) error,
	base Sample, done map[string]bool, save func(*Sample) error) error {
	opts := transport.Options{RootCAs: roots, Timeout: 10 * time.Second, OpenSockets: open}
	if cond == "reused" {
		opts.Reuse = true
	} else {
		transport.Conditions[cond].Apply(&opts)
	}
	tr, err := transport.New(url, opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	q := func(i int) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("l%d-%s-%s.privacy.test.", i, rung, cond), dns.TypeA)
		return m
	}
	if cond != "fresh" || rung == protocol.ODoH {
		if _, err := tr.Exchange(ctx, q(-1)); err != nil {
			return fmt.Errorf("privacy: warming %s (%s): %w", url, cond, err)
		}
	}
	for rep := range c.Repeat {
		s := base
		s.Part, s.Rung, s.Condition, s.Rep = "dns", rung, cond, rep
		if done[s.key()] {
			c.Advance(1)
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, _ := tr.Exchange(ctx, q(rep))
		s.Status, s.Error, s.Ms = string(rec.Status), rec.Error, rec.Timing.TotalMs
		s.Bytes, s.Resumed, s.Used0RTT, s.ODoH = rec.Bytes, rec.Conn.TLSResumed, rec.Conn.Used0RTT, rec.ODoH
		if err := save(&s); err != nil {
			return err
		}
	}
	return nil
}

// pageTarget is where a page rung's lookups go: its DNS's URL, or, for
// the coalesced rung, the page's own web listener at ip.
func pageTarget(urls map[string]string, dns, ip string) string {
	if dns == Coalesced {
		return fmt.Sprintf("%s:%d", ip, webPort)
	}
	return urls[dns]
}

// pages loads the page Repeat times with doxlab's loader over HTTP/3,
// its lookups over one DNS transport kept open (a warm-up opens it, as a
// stub or browser keeps its resolver's connection), each load on a new
// connection to the page: with the ECH config of the page's HTTPS record,
// or with its name in clear. The coalesced rung's lookups ride on that
// connection instead (url is then the web listener's address), which
// offers echList, the config an earlier visit would have left.
func (c *Privacy) pages(ctx context.Context, url, dnsRung string, withECH bool, echList []byte, g *pageload.Graph, roots *x509.CertPool, open func(func() error) error,
	base Sample, done map[string]bool, save func(*Sample) error) error {
	cfg := pageload.Config{Protocol: "h3", Port: webPort, RootCAs: roots, HTTPSRecords: true, NoECH: !withECH, Timeout: 10 * time.Second, OpenSockets: open,
		AllowSpecial: c.own}
	cond := "warm"
	if dnsRung == Coalesced {
		// No resolver connection to keep: each load's lookups ride on its
		// own new connection to the page.
		cond = "fresh"
		web, err := netip.ParseAddrPort(url)
		if err != nil {
			return fmt.Errorf("privacy: the coalesced rung's server %q: %w", url, err)
		}
		cfg.Coalesce = &pageload.Coalesce{Mode: pageload.CoalesceDNSStream, Server: web, Name: site}
		if withECH {
			cfg.Coalesce.ECHConfigList = echList
		}
	} else {
		tr, err := transport.New(url, transport.Options{RootCAs: roots, Timeout: 10 * time.Second, OpenSockets: open, Reuse: true})
		if err != nil {
			return err
		}
		defer tr.Close()
		cfg.Resolver = &pageload.DNS{Name: dnsRung, Transport: tr}
		warm := new(dns.Msg)
		warm.SetQuestion("warm.privacy.test.", dns.TypeA)
		if _, err := tr.Exchange(ctx, warm); err != nil {
			return fmt.Errorf("privacy: warming %s: %w", url, err)
		}
	}
	for rep := range c.Repeat {
		s := base
		s.Part, s.Rung, s.Condition, s.Rep = "page", pageRung(dnsRung, withECH), cond, rep
		if done[s.key()] {
			c.Advance(1)
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := pageload.New(cfg)
		if err != nil {
			return err
		}
		r := l.Load(ctx, g)
		s.Status, s.Error, s.Ms = r.Status, r.Error, r.PLTMs
		if len(r.Lookups) > 0 {
			s.LookupMs = r.Lookups[len(r.Lookups)-1].EndMs - r.Lookups[0].StartMs
		}
		for _, conn := range r.Conns {
			s.ECH = append(s.ECH, conn.ECH)
		}
		if err := save(&s); err != nil {
			return err
		}
	}
	return nil
}

// browserLoads loads the page Repeat times in Chromium in the client
// host, its DNS over the server's DoH in secure mode, with ECH on or
// switched off, each load after a reset (caches, sockets and tickets
// gone): PLT and FCP, and what the web server recorded of ECH.
func (c *Privacy) browserLoads(ctx context.Context, tb experiment.Net, withECH bool, target *server.Server, web *server.RecordLog,
	base Sample, done map[string]bool, save func(*Sample) error) error {
	opts := browser.Options{Exec: c.Browser, NetNS: tb.NetNS("client"), SPKI: []string{target.SPKI()},
		SecureDNS: "https://" + target.Addr("doh").String() + "/dns-query",
		// Chromium's QUIC takes a certificate of a private root only for
		// a host named here (on a port it never uses).
		ForceQUIC: []string{site + ":1"}, NoECH: !withECH}
	b, err := browser.Launch(ctx, opts)
	if err != nil {
		return fmt.Errorf("privacy: %w", err)
	}
	defer b.Close()
	url := fmt.Sprintf("https://%s:%d/", site, webPort)
	if b.Reset(ctx, true) == nil {
		b.Load(ctx, url, 20*time.Second) // a browser's first page costs it more: unmeasured
	}
	for rep := range c.Repeat {
		s := base
		s.Part, s.Rung, s.Condition, s.Rep = "browser", pageRung(protocol.DoH2, withECH), "fresh", rep
		if done[s.key()] {
			c.Advance(1)
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.Reset(ctx, true); err != nil {
			return fmt.Errorf("privacy: resetting the browser: %w", err)
		}
		mark := web.Mark()
		l := b.Load(ctx, url, 20*time.Second)
		s.Status, s.Error, s.Ms, s.FCPMs = l.Status, l.Error, l.PLTMs, l.FCPMs
		target.Settle(ctx)
		webFacts(&s, web.Since(mark))
		if err := save(&s); err != nil {
			return err
		}
	}
	return nil
}

// writePage writes a small page (a document, a stylesheet and a script
// that asks for an image) into dir and returns its graph.
func writePage(dir string) (*pageload.Graph, error) {
	files := map[string]string{
		"index.html": "<!doctype html><title>privacy</title><link rel=stylesheet href=a.css><p>" + strings.Repeat("the ladder ", 2000) + "<script src=b.js></script>",
		"a.css":      "p{margin:1em}",
		"b.js":       "new Image().src='c.png'",
		"c.png":      strings.Repeat("p", 20000),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	page := "https://" + site + "/"
	size := func(n string) int64 { return int64(len(files[n])) }
	g := &pageload.Graph{Page: page, OnloadGapMs: 1, Resources: []pageload.Resource{
		{URL: page, Type: "Document", Parent: -1, Size: size("index.html")},
		{URL: page + "a.css", Type: "Stylesheet", Parent: 0, AfterBytes: 100, Size: size("a.css")},
		{URL: page + "b.js", Type: "Script", Parent: 0, AfterBytes: size("index.html"), Size: size("b.js")},
		{URL: page + "c.png", Type: "Image", Parent: 2, AfterBytes: size("b.js"), Size: size("c.png")},
	}}
	return g, g.Check()
}

// echConfig asks the HTTPS record of the site's port over DoH for its
// ech= config list, as a browser bootstraps ECH (RFC 9848).
func echConfig(ctx context.Context, url string, roots *x509.CertPool, open func(func() error) error) ([]byte, error) {
	tr, err := transport.New(url, transport.Options{RootCAs: roots, Timeout: 10 * time.Second, OpenSockets: open})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	q := new(dns.Msg)
	q.SetQuestion(fmt.Sprintf("_%d._https.%s.", webPort, site), dns.TypeHTTPS)
	rec, err := tr.Exchange(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("privacy: the site's HTTPS record: %w", err)
	}
	if list := ech.InAnswer(rec.Response.Answer); list != nil {
		return list, nil
	}
	return nil, errors.New("privacy: the site's HTTPS record has no ech=")
}

// handshake opens a new HTTP/3 connection to the site, with ECH when
// list is set (retrying once with the retry configs when rejected), and
// fetches the page: the time from the dial to its last octet.
// With tickets it resumes, and with early it sends the request in 0-RTT.
// It returns the port its connections came from (0 when none was made).
func (c *Privacy) handshake(ctx context.Context, addr string, list []byte, roots *x509.CertPool, open func(func() error) error,
	tickets tls.ClientSessionCache, early bool, s *Sample) (port int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fail := func(err error) { s.Status, s.Error = "error", err.Error() }
	var udp *net.UDPConn
	if err := open(func() (err error) {
		udp, err = net.ListenUDP("udp", nil)
		return err
	}); err != nil {
		fail(err)
		return
	}
	port = udp.LocalAddr().(*net.UDPAddr).Port
	tr := &quic.Transport{Conn: udp}
	defer func() {
		tr.Close()
		udp.Close()
	}()
	remote, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		fail(err)
		return
	}
	conf := &tls.Config{ServerName: site, RootCAs: roots, NextProtos: []string{http3.NextProtoH3}, MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: list, ClientSessionCache: tickets}
	dial, method := tr.Dial, http.MethodGet
	if early {
		dial, method = tr.DialEarly, http3.MethodGet0RTT // http3 sends only these before the handshake
	}
	start := time.Now()
	qc, err := dial(ctx, remote, conf, &quic.Config{})
	if rej, ok := errors.AsType[*tls.ECHRejectionError](err); ok && len(rej.RetryConfigList) > 0 {
		s.Retried = true
		conf.EncryptedClientHelloConfigList = rej.RetryConfigList
		qc, err = tr.Dial(ctx, remote, conf, &quic.Config{})
	}
	if err != nil {
		fail(err)
		return
	}
	defer qc.CloseWithError(0, "")
	req, _ := http.NewRequestWithContext(ctx, method, fmt.Sprintf("https://%s:%d/", site, webPort), nil)
	resp, err := (&http3.Transport{}).NewClientConn(qc).RoundTrip(req)
	if err != nil {
		fail(err)
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.Ms = ms(time.Since(start))
	select {
	case <-qc.HandshakeComplete():
	case <-ctx.Done():
	}
	// Held open a round trip more, unmeasured: a connection closed at
	// once after a 0-RTT answer can take the client's Finished with it,
	// and the server then records no handshake (so no ECH) for it.
	time.Sleep(time.Duration(s.RTTMs*float64(time.Millisecond)) + 5*time.Millisecond)
	cs := qc.ConnectionState()
	s.Resumed, s.Used0RTT = cs.TLS.DidResume, cs.Used0RTT
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err != nil {
		fail(fmt.Errorf("the page: %w", err))
		return
	}
	s.Status = "ok"
	return port
}

// served is what the web server recorded from mark on, once it holds
// the records of the sample's conns connections from port, the last of
// them completed, or after five seconds: the server records a
// connection in its own goroutine, which a busy machine may run after
// the client has closed it, past what Settle waits for (it knows only
// the handshakes the server has seen complete), and a 0-RTT sample's
// one connection can end before then. A stale config's rejected
// connection is recorded when its client's abort arrives, which can be
// after the retry's record. With no conns (a failed sample) or no port,
// it is what there is.
func served(ctx context.Context, web *server.RecordLog, mark, port, conns int) []*server.Record {
	if conns == 0 || port == 0 {
		return web.Since(mark)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	from := strconv.Itoa(port)
	recs, _ := web.Await(ctx, mark, func(recs []*server.Record) bool {
		n, completed := 0, false
		for _, r := range recs {
			if r.Kind == "conn" && r.Listener == "web" && r.RemotePort() == from {
				n++
				completed = completed || r.Error == ""
			}
		}
		return completed && n >= conns
	})
	return recs
}

// conns is how many connections an ok web sample made: two when a stale
// config was rejected and retried. A failed one is owed no record.
func (s *Sample) conns() int {
	switch {
	case s.Status != "ok":
		return 0
	case s.Retried:
		return 2
	}
	return 1
}

// webFacts takes what the web server recorded of the sample's
// connections: ECH per connection and the outer name.
func webFacts(s *Sample, recs []*server.Record) {
	for _, r := range recs {
		if r.Kind != "conn" || r.Listener != "web" {
			continue
		}
		s.ECH = append(s.ECH, r.ECH)
		if r.ECH == ech.Accepted || s.OuterSNI == "" {
			s.OuterSNI = r.OuterSNI
			if s.OuterSNI == "" {
				s.OuterSNI = r.SNI
			}
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

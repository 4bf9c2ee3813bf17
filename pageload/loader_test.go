package pageload_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

const host = "page.doxlab.test"

// site serves a page with a style sheet, a script and an image the
// script asks for, over HTTP/3 and HTTP/2 on loopback, with DNS on UDP.
func site(t *testing.T) (*server.Server, *pageload.Graph) {
	dir := t.TempDir()
	files := map[string]string{
		"index.html": "<html><head><link rel=stylesheet href=a.css></head><body>" + strings.Repeat("x", 60000) + "<script src=b.js></script></body></html>",
		"a.css":      "body{}",
		"b.js":       "new Image().src='c.png'",
		"c.png":      strings.Repeat("p", 20000),
	}
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	srv := serveSite(t, "127.0.0.1:0", "127.0.0.1:0", dir)
	base := "https://" + host + "/"
	size := func(n string) int64 { return int64(len(files[n])) }
	g := &pageload.Graph{Page: base, OnloadGapMs: 5, Resources: []pageload.Resource{
		{URL: base, Type: "Document", Parent: -1, Size: size("index.html")},
		{URL: base + "a.css", Type: "Stylesheet", Parent: 0, AfterBytes: 60, Size: size("a.css")},
		{URL: base + "b.js", Type: "Script", Parent: 0, AfterBytes: size("index.html"), GapMs: 2, Size: size("b.js")},
		{URL: base + "c.png", Type: "Image", Parent: 2, AfterBytes: size("b.js"), GapMs: 40, Size: size("c.png")},
	}}
	require.NoError(t, g.Check())
	return srv, g
}

// onLoopback opens loopback to the tests' pages, which their resolvers
// place there by name (TestPlacing: else refused).
var onLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// serveSite serves the site's files from dir over the web listener on
// web (UDP for HTTP/3, TCP for HTTP/2) and its name's A record on udp.
func serveSite(t *testing.T, udp, web, dir string) *server.Server {
	t.Helper()
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{UDP: udp, Web: web},
		TLS:     server.TLS{Names: []string{host}},
		Web:     server.Web{Roots: map[string]string{host: dir}},
		Answers: server.Answers{Static: []string{host + ". 300 IN A 127.0.0.1"}},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
	return srv
}

// resolverAndRoots is DoUDP to srv, and a pool that trusts srv.
func resolverAndRoots(t *testing.T, srv *server.Server) (*pageload.DNS, *x509.CertPool) {
	t.Helper()
	udp, err := transport.New("udp://"+srv.Addr("udp").String(), transport.Options{Timeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { udp.Close() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	return &pageload.DNS{Name: "udp", Transport: udp}, roots
}

// kind are the records of recs of one kind (conn, query, ...).
func kind(recs []*server.Record, k string) []*server.Record {
	var out []*server.Record
	for _, r := range recs {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// queries collects the query records srv writes; take returns those
// since the last take.
func queries(srv *server.Server) (take func() []*server.Record) {
	var log server.RecordLog
	srv.OnRecord(log.Add)
	mark := 0
	return func() []*server.Record {
		recs := log.Since(mark)
		mark += len(recs)
		return kind(recs, "query")
	}
}

// field maps records to one of their fields.
func field(rs []*server.Record, f func(*server.Record) string) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}

func qtype(r *server.Record) string { return r.QType }

func loader(t *testing.T, srv *server.Server, proto string, zeroRTT bool) *pageload.Loader {
	dns, roots := resolverAndRoots(t, srv)
	l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Protocol: proto, ZeroRTT: zeroRTT, Resolver: dns,
		Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second})
	require.NoError(t, err)
	return l
}

func port(t *testing.T, a net.Addr) int {
	_, p, err := net.SplitHostPort(a.String())
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// TestReplayFollowsTheGraph loads the page over HTTP/3, cold then warm
// with 0-RTT, and over HTTP/2: every resource arrives whole, each is
// asked for only once its parent has delivered what discovered it and
// its gap has passed, the name is looked up once, one connection serves
// the origin, and the warm load is resumed and in 0-RTT.
func TestReplayFollowsTheGraph(t *testing.T) {
	srv, g := site(t)
	for _, c := range []struct {
		proto string
		zero  bool
	}{{"h3", false}, {"h3", true}, {"h2", false}} {
		l := loader(t, srv, c.proto, c.zero)
		for _, warm := range []bool{false, true} {
			r := l.Load(context.Background(), g)
			name := c.proto + map[bool]string{false: " cold", true: " warm"}[warm]
			if c.zero {
				name += " 0-RTT"
			}
			require.Equal(t, "ok", r.Status, "%s: %s", name, r.Error)
			for i, f := range r.Resources {
				require.Equal(t, g.Resources[i].Size, f.Bytes, "%s: %s whole", name, f.URL)
				require.Equal(t, 200, f.Status, name)
				if i > 0 {
					p := r.Resources[g.Resources[i].Parent]
					require.GreaterOrEqual(t, f.Sent, p.FirstByte, "%s: %s asked for after its parent's first byte", name, f.URL)
				}
			}
			require.GreaterOrEqual(t, r.Resources[3].Due+0.001, r.Resources[2].End+40, "%s: the script's 40 ms gap before its image", name)
			require.Len(t, r.Lookups, 1, name)
			require.Equal(t, "udp", r.Lookups[0].Transport)
			require.Equal(t, []string{"127.0.0.1"}, r.Lookups[0].Addrs)
			require.Len(t, r.Conns, 1, "%s: one connection for the origin", name)
			cn := r.Conns[0]
			require.Equal(t, 4, cn.Requests, name)
			require.Equal(t, warm, cn.Resumed, "%s: resumed with the first load's ticket", name)
			require.Equal(t, warm && c.zero, cn.Sent0RTT && cn.Used0RTT, "%s: 0-RTT sent and accepted", name)
			require.InDelta(t, r.NetworkMs+5, r.PLTMs, 0.001, "PLT adds the onload gap")
			require.Greater(t, r.TTFBMs, 0.0)
		}
	}
}

// TestZeroRTTRejectedIsRetried: a server restarted with fresh ticket
// keys rejects the 0-RTT a warm load sends; the load still completes,
// its requests asked again on a connection dialled without 0-RTT, and
// the connection says the 0-RTT was sent and rejected.
func TestZeroRTTRejectedIsRetried(t *testing.T) {
	srv, g := site(t)
	dns, roots := resolverAndRoots(t, srv) // roots gets the second server's certificate once it is made
	l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Protocol: "h3", ZeroRTT: true, Resolver: dns,
		Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second})
	require.NoError(t, err)
	warm := loadRejected(t, l, srv, g, roots)
	for i, f := range warm.Resources {
		require.Equal(t, g.Resources[i].Size, f.Bytes, "%s whole", f.URL)
	}
	next := warm.Conns[1]
	require.False(t, next.Sent0RTT)
	require.Equal(t, 4, next.Requests)
}

// loadRejected loads g with l (a ticket), restarts srv with new keys and
// loads again: the load must succeed on a connection that followed the
// rejected one.
func loadRejected(t *testing.T, l *pageload.Loader, srv *server.Server, g *pageload.Graph, roots *x509.CertPool) *pageload.Result {
	t.Helper()
	cold := l.Load(context.Background(), g)
	require.Equal(t, "ok", cold.Status, cold.Error)
	restart(t, srv, g, roots)
	warm := l.Load(context.Background(), g)
	require.Equal(t, "ok", warm.Status, warm.Error)
	require.Len(t, warm.Conns, 2, "the rejected connection, and the one that asked again")
	require.True(t, warm.Conns[0].Rejected0RTT)
	require.False(t, warm.Conns[0].Used0RTT)
	return warm
}

// restart replaces srv by a server on the same addresses with the same
// files but new ticket keys (and certificate, added to roots), so that
// the 0-RTT a loader's ticket offers is rejected.
func restart(t *testing.T, srv *server.Server, g *pageload.Graph, roots *x509.CertPool) {
	t.Helper()
	web, udp := srv.Addr("web").String(), srv.Addr("udp").String()
	dir := t.TempDir()
	for _, r := range g.Resources { // the same files, served again
		name := strings.TrimPrefix(r.URL, "https://"+host+"/")
		if name == "" {
			name = "index.html"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), make([]byte, r.Size), 0o644))
	}
	srv.Close()
	roots.AppendCertsFromPEM(serveSite(t, udp, web, dir).CertPEM())
}

// TestCoalescedLookupRetriedAfterRejected0RTT: a lookup on the page's
// connection whose 0-RTT the server rejects is asked again on the
// connection that replaces it, in both coalescing modes.
func TestCoalescedLookupRetriedAfterRejected0RTT(t *testing.T) {
	for _, mode := range []string{pageload.CoalesceDoH3, pageload.CoalesceDNSStream} {
		t.Run(mode, func(t *testing.T) {
			srv, g := site(t)
			web := srv.Addr("web").(*net.UDPAddr).AddrPort()
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(srv.CertPEM())
			l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, ZeroRTT: true, Port: int(web.Port()), RootCAs: roots, Timeout: 10 * time.Second,
				Coalesce: &pageload.Coalesce{Mode: mode, Server: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), web.Port()), Name: host}})
			require.NoError(t, err)
			warm := loadRejected(t, l, srv, g, roots)
			require.Len(t, warm.Lookups, 1)
			lk := warm.Lookups[0]
			require.True(t, lk.Coalesced)
			require.Equal(t, 1, lk.Conn, "answered on the connection that followed")
			require.False(t, lk.Early)
			require.Equal(t, []string{"127.0.0.1"}, lk.Addrs)
			require.Equal(t, 1, warm.Conns[1].DNSQueries)
			require.Equal(t, 4, warm.Conns[1].Requests)
		})
	}
}

// TestLoadFailuresAreRecorded: a name that does not resolve and a
// missing resource end the load with an error that names them, and the
// other resources still load.
func TestLoadFailuresAreRecorded(t *testing.T) {
	srv, g := site(t)
	l := loader(t, srv, "h3", false)
	bad := *g
	bad.Resources = append(append([]pageload.Resource{}, g.Resources...),
		pageload.Resource{URL: "https://" + host + "/missing.js", Parent: 0, AfterBytes: 100},
		pageload.Resource{URL: "https://nowhere.doxlab.test/x.png", Parent: 0, AfterBytes: 100})
	r := l.Load(context.Background(), &bad)
	require.Equal(t, "error", r.Status)
	require.Contains(t, r.Error, "missing.js")
	require.Contains(t, r.Resources[4].Error, "404")
	require.NotEmpty(t, r.Resources[5].Error)
	require.Equal(t, g.Resources[3].Size, r.Resources[3].Bytes, "the rest loads")
	require.Len(t, r.Lookups, 2)
}

// TestCoalescedLoads resolves the page on its own connection, by DoH/3
// and by a DNS stream, cold and then warm in 0-RTT: each load opens
// exactly one QUIC connection (the server's records say so), its lookup
// rides on it, and the warm one's query was sent before the handshake
// completed, on a connection the server accepted 0-RTT on.
func TestCoalescedLoads(t *testing.T) {
	srv, g := site(t)
	var mu sync.Mutex
	var recs []*server.Record
	srv.OnRecord(func(r *server.Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	})
	// Through a relay that holds each reply 20 ms: the warm lookup has
	// that long to leave before the handshake can end, however slowly a
	// busy machine schedules the loader (on bare loopback it can lose).
	web := netip.MustParseAddrPort(testutil.DelayUDP(t, srv.Addr("web").String(), 20*time.Millisecond))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	for _, mode := range []string{pageload.CoalesceDoH3, pageload.CoalesceDNSStream} {
		l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, ZeroRTT: true, Port: int(web.Port()), RootCAs: roots, Timeout: 10 * time.Second,
			Coalesce: &pageload.Coalesce{Mode: mode, Server: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), web.Port()), Name: host}})
		require.NoError(t, err)
		for _, warm := range []bool{false, true} {
			name := fmt.Sprintf("%s warm=%v", mode, warm)
			mu.Lock()
			recs = nil
			mu.Unlock()
			r := l.Load(context.Background(), g)
			require.Equal(t, "ok", r.Status, "%s: %s", name, r.Error)
			require.Len(t, r.Conns, 1, "%s: DNS and page on one connection", name)
			require.Equal(t, 1, r.Conns[0].DNSQueries, name)
			require.Equal(t, 4, r.Conns[0].Requests, name)
			require.Len(t, r.Lookups, 1, name)
			lk := r.Lookups[0]
			require.True(t, lk.Coalesced, name)
			require.Equal(t, 0, lk.Conn, name)
			require.Equal(t, []string{"127.0.0.1"}, lk.Addrs, name)
			require.Equal(t, warm, lk.Early, "%s: the lookup went in 0-RTT", name)
			require.Equal(t, warm, r.Conns[0].Used0RTT, name)
			time.Sleep(50 * time.Millisecond) // the server's conn record follows the handshake
			mu.Lock()
			var conns, queries int
			for _, rec := range recs {
				if rec.Kind == "conn" && rec.Listener == "web" {
					conns++
				}
				if rec.Kind == "query" {
					queries++
					require.Equal(t, map[string]string{"doh3": "doh3", "dnsstream": "dnsstream"}[mode], rec.Transport, name)
					// The server's early flag is not asserted here: on loopback the
					// client's Finished can beat the stream to the server (the
					// coalescing experiment checks it across an emulated link).
					require.Equal(t, warm, rec.Used0RTT, "%s: the query's connection used 0-RTT", name)
					require.Equal(t, "NOERROR", rec.Rcode, name)
				}
			}
			mu.Unlock()
			require.Equal(t, 1, conns, "%s: the server saw one QUIC handshake", name)
			require.Equal(t, 1, queries, name)
		}
	}
}

// TestDNSStreamNeedsTheSetting: a server that does not offer DNS streams
// gets none; the load fails with the reason.
func TestDNSStreamNeedsTheSetting(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html></html>"), 0o644))
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{Web: "127.0.0.1:0"},
		TLS:     server.TLS{Names: []string{host}},
		Web:     server.Web{Roots: map[string]string{host: dir}, NoDNSStream: true},
		Answers: server.Answers{Static: []string{host + ". 300 IN A 127.0.0.1"}},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	web := srv.Addr("web").(*net.UDPAddr).AddrPort()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Port: int(web.Port()), RootCAs: roots, Timeout: 5 * time.Second,
		Coalesce: &pageload.Coalesce{Mode: pageload.CoalesceDNSStream, Server: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), web.Port()), Name: host}})
	require.NoError(t, err)
	r := l.Load(context.Background(), &pageload.Graph{Page: "https://" + host + "/", Resources: []pageload.Resource{{URL: "https://" + host + "/", Parent: -1}}})
	require.Equal(t, "error", r.Status)
	require.Contains(t, r.Error, "does not offer DNS streams")
}

// TestOriginSkipsDNS: the server announces two of the three hosts it
// serves in an ORIGIN frame; a page with a resource from each looks up
// the first (its connection had to be opened), takes the announced one
// on that connection without a lookup, and looks up the unannounced one
// (then pooled by address and certificate).
func TestOriginSkipsDNS(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>"+strings.Repeat("x", 5000)+"</html>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.png"), []byte("png"), 0o644))
	const other, unannounced = "other.doxlab.test", "unannounced.doxlab.test"
	port := testutil.FreePort(t)
	web, udp := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:0"
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{UDP: udp, Web: web},
		TLS:     server.TLS{Names: []string{host, other, unannounced}},
		Web:     server.Web{Roots: map[string]string{"*": dir}, Origins: []string{"https://" + host + ":" + strconv.Itoa(port), "https://" + other + ":" + strconv.Itoa(port)}},
		Answers: server.Answers{Any: "127.0.0.1"},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	take := queries(srv)
	dnsUDP, roots := resolverAndRoots(t, srv)
	l2, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Origins: true, Resolver: dnsUDP, Port: port, RootCAs: roots, Timeout: 10 * time.Second})
	require.NoError(t, err)
	base := "https://" + host + "/"
	g := &pageload.Graph{Page: base, Resources: []pageload.Resource{
		{URL: base, Parent: -1, Size: 5013},
		{URL: "https://" + other + "/a.png", Parent: 0, AfterBytes: 5013, GapMs: 20},
		{URL: "https://" + unannounced + "/a.png", Parent: 0, AfterBytes: 5013, GapMs: 20},
	}}
	r := l2.Load(context.Background(), g)
	require.Equal(t, "ok", r.Status, r.Error)
	require.Len(t, r.Conns, 1, "one connection serves all three")
	require.ElementsMatch(t, []string{"https://" + host + ":" + strconv.Itoa(port), "https://" + other + ":" + strconv.Itoa(port)}, r.Conns[0].Announced)
	require.Len(t, r.Conns[0].Origins, 3)
	by := map[string]string{}
	for _, lk := range r.Lookups {
		by[lk.Host] = lk.Transport
	}
	require.Equal(t, map[string]string{host: "udp", other: "origin", unannounced: "udp"}, by)
	queried := field(take(), func(r *server.Record) string { return strings.TrimSuffix(r.QName, ".") })
	require.ElementsMatch(t, []string{host, unannounced}, queried, "no query for the announced origin")
}

// TestHTTPSRecordsAndDiscovery: with HTTPS records, the first load goes
// to HTTP/3 at once on the record's hint, with no A query; without
// them, a discovering loader starts over HTTP/2 and takes HTTP/3 on the
// next load from the Alt-Svc header it was given.
func TestHTTPSRecordsAndDiscovery(t *testing.T) {
	srv, port := httpsSite(t, "alpn=h3,h2 ipv4hint=127.0.0.1", server.ECH{})
	require.NoError(t, srv.Start())
	defer srv.Close()
	take := queries(srv)
	dns, roots := resolverAndRoots(t, srv)
	g := &pageload.Graph{Page: "https://" + host + "/", Resources: []pageload.Resource{{URL: "https://" + host + "/", Parent: -1}}}
	newLoader := func(https bool) *pageload.Loader {
		l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Protocol: "auto", HTTPSRecords: https, Resolver: dns,
			Port: port, RootCAs: roots, Timeout: 10 * time.Second})
		require.NoError(t, err)
		return l
	}

	r := newLoader(true).Load(context.Background(), g)
	require.Equal(t, "ok", r.Status, r.Error)
	require.Equal(t, "h3", r.Conns[0].Protocol, "the HTTPS record's alpn=h3 took the first load to HTTP/3")
	require.NotNil(t, r.Lookups[0].HTTPS)
	require.True(t, r.Lookups[0].HTTPS.UsedHints)
	require.Equal(t, []string{"127.0.0.1"}, r.Lookups[0].Addrs)
	require.Equal(t, []string{"HTTPS"}, field(take(), qtype), "the hints spared the A query")

	l := newLoader(false)
	require.Equal(t, "h2", l.Load(context.Background(), g).Conns[0].Protocol, "nothing said HTTP/3 yet")
	require.Equal(t, "h3", l.Load(context.Background(), g).Conns[0].Protocol, "the Alt-Svc header did")
	require.Equal(t, []string{"A", "A"}, field(take(), qtype))
}

// slowHosts resolves every name to 127.0.0.1 after a pause, and notes
// the most lookups it had in flight at once.
type slowHosts struct {
	inflight, most atomic.Int32
}

func (s *slowHosts) Resolve(ctx context.Context, host string) ([]netip.Addr, *pageload.Lookup, error) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(30 * time.Millisecond)
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, &pageload.Lookup{Transport: "test"}, nil
}

// TestMaxLookups: a page whose document names six origins at once
// resolves them six at a time without a bound, two at a time with
// MaxLookups 2, as a browser's host resolver queues its jobs; a lookup
// that waited for its turn records the wait.
func TestMaxLookups(t *testing.T) {
	names := []string{host}
	for i := range 6 {
		names = append(names, fmt.Sprintf("o%d.doxlab.test", i))
	}
	srv, roots := imageServer(t, names)
	base := "https://" + host + "/"
	g := &pageload.Graph{Page: base, Resources: []pageload.Resource{{URL: base, Parent: -1, Size: 13}}}
	for _, n := range names[1:] {
		g.Resources = append(g.Resources, pageload.Resource{URL: "https://" + n + "/a.png", Parent: 0, AfterBytes: 13, Size: 3})
	}
	for _, tc := range []struct{ max, want int32 }{{0, 6}, {2, 2}} {
		res := &slowHosts{}
		l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Resolver: res, MaxLookups: int(tc.max), Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second})
		require.NoError(t, err)
		r := l.Load(context.Background(), g)
		require.Equal(t, "ok", r.Status, r.Error)
		require.Equal(t, tc.want, res.most.Load(), "lookups in flight at once with MaxLookups %d", tc.max)
		longest := 0.0
		for _, lk := range r.Lookups {
			longest = max(longest, lk.EndMs-lk.StartMs)
		}
		if tc.max == 2 {
			require.Greater(t, longest, 80.0, "the last of six, two at a time, waited two turns of 30 ms")
		}
	}
	_, err := pageload.New(pageload.Config{Resolver: &slowHosts{}, MaxLookups: -1})
	require.ErrorContains(t, err, "max lookups -1")
}

// TestOriginPortIsAPort: the origins' port (doxlab load --port) is one;
// 70000 was dialled as 4464 over HTTP/3, a port nobody asked for, and
// -1 as 65535.
func TestOriginPortIsAPort(t *testing.T) {
	for _, port := range []int{-1, 65536, 70000} {
		_, err := pageload.New(pageload.Config{Resolver: &slowHosts{}, Port: port})
		require.EqualError(t, err, fmt.Sprintf("port %d: want 1-65535 (0: 443)", port))
	}
	for _, port := range []int{0, 1, 8443, 65535} {
		_, err := pageload.New(pageload.Config{Resolver: &slowHosts{}, Port: port})
		require.NoError(t, err, port)
	}
}

// TestHTTPSAlongside: as Chromium's resolver, the loader asks the HTTPS
// record beside the A records and goes on with the A answer; the server
// sees both, the lookup says so, and it makes no other difference.
func TestHTTPSAlongside(t *testing.T) {
	srv, g := site(t)
	take := queries(srv)
	dns, roots := resolverAndRoots(t, srv)
	cfg := pageload.Config{AllowSpecial: onLoopback, Protocol: "h3", Resolver: dns, HTTPSAlongside: true,
		Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second}
	l, err := pageload.New(cfg)
	require.NoError(t, err)
	r := l.Load(context.Background(), g)
	require.Equal(t, "ok", r.Status, r.Error)
	require.Len(t, r.Lookups, 1)
	require.True(t, r.Lookups[0].HTTPSAlongside)
	require.Nil(t, r.Lookups[0].HTTPS, "the HTTPS answer is not waited for, nor used")
	var seen []string
	require.Eventually(t, func() bool {
		seen = append(seen, field(take(), qtype)...)
		return len(seen) >= 2
	}, 2*time.Second, 10*time.Millisecond, "the server saw two queries")
	require.ElementsMatch(t, []string{"A", "HTTPS"}, seen, "one A and one HTTPS query")

	cfg.HTTPSRecords = true
	_, err = pageload.New(cfg)
	require.ErrorContains(t, err, "not with HTTPS records")
}

// TestLoaderBoundsWhatItReads: a body over the resource bound fails its
// resource, bodies over the page bound end the load with an error, a
// graph file without end or with too many resources is refused, each
// with a line that says so.
func TestLoaderBoundsWhatItReads(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 3<<20)
	for _, n := range []string{"index.html", "a.bin", "b.bin"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), big, 0o644))
	}
	srv := serveSite(t, "127.0.0.1:0", "127.0.0.1:0", dir)
	dns, roots := resolverAndRoots(t, srv)
	base := "https://" + host + "/"
	g := &pageload.Graph{Page: base, Resources: []pageload.Resource{
		{URL: base, Type: "Document", Parent: -1, Size: int64(len(big))},
		{URL: base + "a.bin", Parent: 0, AfterBytes: 1, Size: int64(len(big))},
		{URL: base + "b.bin", Parent: 0, AfterBytes: 1, Size: int64(len(big))},
	}}
	for _, c := range []struct {
		name           string
		resource, page int64
		want           string
		wholeResources int
	}{
		{"resource", 1 << 20, 64 << 20, "response body over the loader's size bound of 1048576 octets a resource", 0},
		{"page", 8 << 20, 4 << 20, "page's bodies over the loader's size bound of 4194304 octets a page", 1},
		{"within", 8 << 20, 16 << 20, "", 3},
	} {
		l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Resolver: dns, Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second,
			MaxResourceBytes: c.resource, MaxPageBytes: c.page})
		require.NoError(t, err)
		r := l.Load(context.Background(), g)
		whole := 0
		for _, f := range r.Resources {
			if f.Bytes == int64(len(big)) && f.Error == "" {
				whole++
			}
			require.LessOrEqual(t, f.Bytes, c.resource+16<<10, c.name)
		}
		if c.want == "" {
			require.Equal(t, "ok", r.Status, r.Error)
		} else {
			require.Equal(t, "error", r.Status, c.name)
			require.Contains(t, r.Error, c.want, c.name)
		}
		require.LessOrEqual(t, whole, c.wholeResources, c.name)
	}

	_, err := pageload.ReadGraph("/dev/zero")
	require.ErrorContains(t, err, "over 64 MiB, more than a page's graph holds")
	many := &pageload.Graph{Page: base, Resources: make([]pageload.Resource, pageload.MaxResources+1)}
	many.Resources[0] = pageload.Resource{URL: base, Parent: -1}
	for i := 1; i < len(many.Resources); i++ {
		many.Resources[i] = pageload.Resource{URL: base, Parent: 0}
	}
	require.ErrorContains(t, many.Check(), "10001 resources, more than 10000")
}

// TestLoaderBoundsRequestsInFlight: a graph of many resources discovered
// at once starts them MaxRequests at a time.
func TestLoaderBoundsRequestsInFlight(t *testing.T) {
	dir := t.TempDir()
	body := make([]byte, 200<<10)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html></html>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.bin"), body, 0o644))
	srv := serveSite(t, "127.0.0.1:0", "127.0.0.1:0", dir)
	dns, roots := resolverAndRoots(t, srv)
	base := "https://" + host + "/"
	g := &pageload.Graph{Page: base, Resources: []pageload.Resource{{URL: base, Type: "Document", Parent: -1, Size: 13}}}
	for i := range 40 {
		g.Resources = append(g.Resources, pageload.Resource{URL: fmt.Sprintf("%sr.bin?%d", base, i), Parent: 0, AfterBytes: 13, Size: int64(len(body))})
	}
	l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Resolver: dns, Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second, MaxRequests: 4})
	require.NoError(t, err)
	r := l.Load(context.Background(), g)
	require.Equal(t, "ok", r.Status, r.Error)
	most := 0
	for _, a := range r.Resources {
		n := 0
		for _, b := range r.Resources {
			if b.Sent <= a.Sent && a.Sent < b.End {
				n++
			}
		}
		most = max(most, n)
	}
	require.LessOrEqual(t, most, 4, "requests in flight at once")
}

// TestLoadOverECH: with HTTPS records, the loader uses the ech= config
// the server publishes, over HTTP/3 and HTTP/2: the server records ECH
// accepted under the public name, with the page's name inside; after
// two key rotations the config is stale, the server rejects it, and the
// loader retries with the retry configs on a second handshake; NoECH
// leaves the name in clear.
func TestLoadOverECH(t *testing.T) {
	srv, port, log, dns, roots := echSite(t, "alpn=h3,h2")
	g := &pageload.Graph{Page: "https://" + host + "/", Resources: []pageload.Resource{{URL: "https://" + host + "/", Parent: -1}}}
	load := func(proto string, noECH bool) (*pageload.Result, []*server.Record) {
		mark := log.Mark()
		l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Protocol: proto, HTTPSRecords: true, NoECH: noECH, Resolver: dns, Port: port, RootCAs: roots, Timeout: 10 * time.Second})
		require.NoError(t, err)
		r := l.Load(context.Background(), g)
		require.Equal(t, "ok", r.Status, r.Error)
		srv.Settle(context.Background())
		return r, kind(log.Since(mark), "conn")
	}
	for _, proto := range []string{"h3", "h2"} {
		r, recs := load(proto, false)
		require.Equal(t, "public.test", r.Lookups[0].HTTPS.ECHPublicName, proto)
		require.Equal(t, "accepted", r.Conns[0].ECH, proto)
		require.Len(t, recs, 1, proto)
		require.Equal(t, "accepted", recs[0].ECH, proto)
		require.Equal(t, "public.test", recs[0].OuterSNI, proto)
		require.Equal(t, host, recs[0].SNI, proto)

		r, recs = load(proto, true)
		require.Empty(t, r.Conns[0].ECH, proto)
		require.Equal(t, host, recs[0].OuterSNI, "%s: the name in clear (GREASE beside it)", proto)
	}
	// A config two rotations old, from a resolver's cache.
	c := &cachingDNS{DNS: dns, m: map[string]*mdns.Msg{}}
	l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Protocol: "h3", HTTPSRecords: true, Resolver: c, Port: port, RootCAs: roots, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.Equal(t, "accepted", l.Load(context.Background(), g).Conns[0].ECH)
	require.NoError(t, srv.RotateECH())
	require.NoError(t, srv.RotateECH())
	// The load before's connection record falls before the mark: written
	// after it, on a busy machine (-race), it was a third record here.
	srv.Settle(context.Background())
	mark := log.Mark()
	r := l.Load(context.Background(), g)
	require.Equal(t, "ok", r.Status, r.Error)
	require.Equal(t, "retried", r.Conns[0].ECH, "rejected, then accepted with the retry configs")
	require.True(t, r.Conns[0].ECHRetried)
	srv.Settle(context.Background())
	conns := kind(log.Since(mark), "conn")
	require.Len(t, conns, 2)
	require.Equal(t, []string{"rejected", "accepted"}, []string{conns[0].ECH, conns[1].ECH})
}

// TestCoalescedLoadOverECH: a coalesced load offers the ECH config it
// was given on its one connection, which carries the page's lookups (a
// DNS stream each) and the page: the server records ECH accepted under
// the public name, the page's name inside; a config the server no longer
// holds is rejected and the retry configs used on a second handshake.
func TestCoalescedLoadOverECH(t *testing.T) {
	srv, port, log, dns, roots := echSite(t, "alpn=h3")
	q := new(mdns.Msg)
	q.SetQuestion(host+".", mdns.TypeHTTPS)
	r, _, err := dns.Exchange(context.Background(), q)
	require.NoError(t, err)
	list := ech.InAnswer(r.Answer)
	require.NotNil(t, list, "the config a browser would remember")
	g := &pageload.Graph{Page: "https://" + host + "/", Resources: []pageload.Resource{{URL: "https://" + host + "/", Parent: -1}}}
	load := func(list []byte) (*pageload.Result, []*server.Record) {
		mark := log.Mark()
		l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Port: port, RootCAs: roots, Timeout: 10 * time.Second,
			Coalesce: &pageload.Coalesce{Mode: pageload.CoalesceDNSStream, Server: netip.MustParseAddrPort("127.0.0.1:" + strconv.Itoa(port)), Name: host, ECHConfigList: list}})
		require.NoError(t, err)
		res := l.Load(context.Background(), g)
		require.Equal(t, "ok", res.Status, res.Error)
		srv.Settle(context.Background())
		return res, log.Since(mark)
	}
	res, got := load(list)
	require.Len(t, res.Conns, 1, "DNS and page on one connection")
	require.Equal(t, "accepted", res.Conns[0].ECH)
	require.True(t, res.Lookups[0].Coalesced)
	var conns, queries int
	for _, rec := range got {
		switch rec.Kind {
		case "conn":
			conns++
			require.Equal(t, "accepted", rec.ECH)
			require.Equal(t, "public.test", rec.OuterSNI, "the network saw the public name")
			require.Equal(t, host, rec.SNI)
		case "query":
			queries++
			require.Equal(t, "dnsstream", rec.Transport)
		}
	}
	require.Equal(t, 1, conns)
	require.Positive(t, queries)

	require.NoError(t, srv.RotateECH())
	require.NoError(t, srv.RotateECH())
	res, _ = load(list)
	require.Equal(t, "retried", res.Conns[0].ECH, "a stale config: rejected, then the retry configs")

	res, got = load(nil)
	require.Empty(t, res.Conns[0].ECH)
	for _, rec := range got {
		if rec.Kind == "conn" {
			require.Equal(t, host, rec.OuterSNI, "no config: the name in clear")
		}
	}
}

// echSite is httpsSite with ECH under public.test, started, its
// records logged, with a resolver asking it and the roots to trust it.
func echSite(t *testing.T, params string) (*server.Server, int, *server.RecordLog, *pageload.DNS, *x509.CertPool) {
	srv, port := httpsSite(t, params, server.ECH{PublicName: "public.test"})
	log := new(server.RecordLog)
	srv.OnRecord(log.Add)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
	dns, roots := resolverAndRoots(t, srv)
	return srv, port, log, dns, roots
}

// httpsSite is a one-page site for host on a web listener of its own
// port, with an HTTPS record of params, and ECH as e says; not started.
func httpsSite(t *testing.T, params string, e server.ECH) (*server.Server, int) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>hi</html>"), 0o644))
	port := testutil.FreePort(t)
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{UDP: "127.0.0.1:0", Web: "127.0.0.1:" + strconv.Itoa(port)},
		TLS:     server.TLS{Names: []string{host}},
		Web:     server.Web{Roots: map[string]string{"*": dir}, ECH: e},
		Answers: server.Answers{Static: []string{host + ". 300 IN A 127.0.0.1", host + ". 300 IN HTTPS 1 . " + params}},
	})
	require.NoError(t, err)
	return srv, port
}

// cachingDNS answers a question it was asked before from its cache, as
// a resolver within the record's TTL does.
type cachingDNS struct {
	*pageload.DNS
	mu sync.Mutex
	m  map[string]*mdns.Msg
}

func (c *cachingDNS) Exchange(ctx context.Context, q *mdns.Msg) (*mdns.Msg, any, error) {
	key := q.Question[0].String()
	c.mu.Lock()
	r, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		r = r.Copy()
		r.Id = q.Id
		return r, nil, nil
	}
	r, rec, err := c.DNS.Exchange(ctx, q)
	if err == nil {
		c.mu.Lock()
		c.m[key] = r.Copy()
		c.mu.Unlock()
	}
	return r, rec, err
}

// hostsResolver answers each host with its address in the map.
type hostsResolver map[string]string

func (h hostsResolver) Resolve(_ context.Context, name string) ([]netip.Addr, *pageload.Lookup, error) {
	a, ok := h[name]
	if !ok {
		return nil, nil, fmt.Errorf("no such host %s", name)
	}
	return []netip.Addr{netip.MustParseAddr(a)}, &pageload.Lookup{Transport: "test"}, nil
}

// TestPageReachesNoMetadata: a page on loopback whose resources name a
// host on loopback and one a hostile resolver puts at the cloud's
// metadata address gets the first and is refused the second at once,
// without a packet towards it: the load says why, and the rest of the
// page still loads.
func TestPageReachesNoMetadata(t *testing.T) {
	srv, roots := imageServer(t, []string{host, "img.doxlab.test", "meta.doxlab.test"})
	base := "https://" + host + "/"
	g := &pageload.Graph{Page: base, Resources: []pageload.Resource{{URL: base, Parent: -1, Size: 13},
		{URL: "https://img.doxlab.test/a.png", Parent: 0, AfterBytes: 13, Size: 3},
		{URL: "https://meta.doxlab.test/latest/meta-data/", Parent: 0, AfterBytes: 13, Size: 3},
		// An address literal with a zone: netip finds it in no prefix,
		// and it passed as no special-purpose address.
		{URL: "https://[fe80::1%25lo]/latest/meta-data/", Parent: 0, AfterBytes: 13, Size: 3}}}
	res := hostsResolver{host: "127.0.0.1", "img.doxlab.test": "127.0.0.1", "meta.doxlab.test": "169.254.169.254"}
	l, err := pageload.New(pageload.Config{AllowSpecial: onLoopback, Resolver: res, Port: port(t, srv.Addr("web")), RootCAs: roots, Timeout: 10 * time.Second})
	require.NoError(t, err)
	r := l.Load(context.Background(), g)
	require.Equal(t, "error", r.Status)
	require.Contains(t, r.Error, "https://meta.doxlab.test/latest/meta-data/: special-purpose address not allowed: meta.doxlab.test is at 169.254.169.254, in 169.254.0.0/16")
	require.Empty(t, r.Resources[0].Error)
	require.Empty(t, r.Resources[1].Error, "the loopback image of a page on loopback")
	require.Less(t, r.Resources[2].End, 1000.0, "refused at once, not timed out")
	require.Contains(t, r.Resources[3].Error, "special-purpose address not allowed: fe80::1%lo is at fe80::1%lo, in fe80::/10")
	for _, c := range r.Conns {
		require.NotContains(t, c.Remote, "169.254", "no connection towards it")
	}
}

// TestResolverCannotPlaceThePage: a resolver that answers the page's
// own name with loopback (a measured resolver, or the page's own DNS)
// gets no connection there unless the loader allows loopback; a page
// whose URL names the address is loaded from it.
func TestResolverCannotPlaceThePage(t *testing.T) {
	srv, roots := imageServer(t, []string{host})
	web := port(t, srv.Addr("web"))
	res := hostsResolver{host: "127.0.0.1"}
	l, err := pageload.New(pageload.Config{Resolver: res, Port: web, RootCAs: roots, Timeout: 10 * time.Second})
	require.NoError(t, err)
	r := l.Load(context.Background(), &pageload.Graph{Page: "https://" + host + "/", Resources: []pageload.Resource{{URL: "https://" + host + "/", Parent: -1}}})
	require.Equal(t, "error", r.Status)
	require.Contains(t, r.Error, "special-purpose address not allowed: the page's host "+host+" is at 127.0.0.1, in 127.0.0.0/8 (loopback")
	require.Empty(t, r.Conns, "no connection to loopback")

	l, err = pageload.New(pageload.Config{Resolver: res, Port: web, Insecure: true, Timeout: 10 * time.Second})
	require.NoError(t, err)
	page := "https://127.0.0.1/"
	r = l.Load(context.Background(), &pageload.Graph{Page: page, Resources: []pageload.Resource{{URL: page, Parent: -1, Size: 13}}})
	require.Equal(t, "ok", r.Status, r.Error)

	_, err = pageload.New(pageload.Config{Resolver: res, AllowSpecial: []netip.Prefix{netip.MustParsePrefix("198.51.99.0/24")}})
	require.ErrorContains(t, err, "allow special 198.51.99.0/24: not special-purpose")
}

// imageServer serves an empty page and a 3-octet image (a.png) over
// HTTP/3 on loopback for each of names, a certificate per name, and
// returns it with the roots that verify it.
func imageServer(t *testing.T, names []string) (*server.Server, *x509.CertPool) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html></html>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.png"), []byte("png"), 0o644))
	srv, err := server.New(&server.Config{Listen: server.Listen{Web: "127.0.0.1:0"}, TLS: server.TLS{Names: names, CertPerName: true}, Web: server.Web{Roots: map[string]string{"*": dir}}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	return srv, roots
}

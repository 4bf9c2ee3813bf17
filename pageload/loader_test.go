package pageload_test

import (
	"context"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{UDP: "127.0.0.1:0", Web: "127.0.0.1:0"},
		TLS:     server.TLS{Names: []string{host}},
		Web:     server.Web{Roots: map[string]string{host: dir}},
		Answers: server.Answers{Static: []string{host + ". 300 IN A 127.0.0.1"}},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
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

func loader(t *testing.T, srv *server.Server, proto string, zeroRTT bool) *pageload.Loader {
	udp, err := transport.New("udp://"+srv.Addr("udp").String(), transport.Options{Timeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { udp.Close() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	l, err := pageload.New(pageload.Config{Protocol: proto, ZeroRTT: zeroRTT, Resolver: &pageload.DNS{Name: "udp", Transport: udp},
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
			require.GreaterOrEqual(t, r.Resources[3].Due, r.Resources[2].End+40, "%s: the script's 40 ms gap before its image", name)
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

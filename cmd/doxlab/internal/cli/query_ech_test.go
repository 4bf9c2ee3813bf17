package cli

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/server"
)

// TestQueryOverECH: --https-record asks the server for its own name's
// HTTPS record first and offers its ECH config on the measured DoH
// exchanges (HTTP/2 and HTTP/3), which say ECH accepted; a server
// named by its address has no record to ask, and one whose record has no
// ech= is refused, each with one line.
func TestQueryOverECH(t *testing.T) {
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{Web: "127.0.0.1:0"},
		TLS:     server.TLS{Names: []string{"dns.test", "plain.test"}},
		Web:     server.Web{ECH: server.ECH{PublicName: "public.test"}},
		Answers: server.Answers{Any: "192.0.2.1", Static: []string{"dns.test. 60 IN HTTPS 1 . alpn=h3,h2"}},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, srv.CertPEM(), 0o644))
	_, port, _ := net.SplitHostPort(srv.Addr("web").String())
	for _, url := range []string{"https://127.0.0.1:" + port + "/dns-query", "h3://127.0.0.1:" + port + "/dns-query"} {
		code, out, errOut := run("query", "--ca", ca, "--sni", "dns.test", "--https-record", "--json", url, "example.com")
		require.Equal(t, 0, code, errOut)
		recs := jsonLines(t, out)
		require.Len(t, recs, 1)
		v, _ := get(recs[0], "conn.ech")
		require.Equal(t, "accepted", v, url)

		code, out, errOut = run("query", "--ca", ca, "--sni", "dns.test", "--https-record", url, "example.com")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, errOut, ";; ECH config from dns.test's HTTPS record: public name public.test")
		require.Contains(t, out, "ECH accepted")
	}
	url := "https://127.0.0.1:" + port + "/dns-query"
	code, _, errOut := run("query", "--ca", ca, "--https-record", url, "example.com")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "127.0.0.1 is an address, which has no HTTPS record: name the server with --sni")
	code, _, errOut = run("query", "--ca", ca, "--sni", "plain.test", "--https-record", url, "example.com")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "plain.test's HTTPS record has no usable ECH config")
}

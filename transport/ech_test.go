package transport_test

import (
	"context"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestDoHOverECH: DoH over HTTP/2 and HTTP/3 to a server whose web
// listener serves ECH, with the config of its HTTPS record: the server
// saw the public name outside and its own inside, and the record says
// accepted; a stale config (two rotations old) fails the exchange, named,
// and says rejected; without a config nothing is offered.
func TestDoHOverECH(t *testing.T) {
	var log server.RecordLog
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{UDP: "127.0.0.1:0", Web: "127.0.0.1:0"},
		TLS:     server.TLS{Names: []string{"dns.test"}},
		Web:     server.Web{ECH: server.ECH{PublicName: "public.test"}},
		Answers: server.Answers{Any: "192.0.2.1", Static: []string{"dns.test. 60 IN HTTPS 1 . alpn=h3,h2"}},
	})
	require.NoError(t, err)
	srv.OnRecord(log.Add)
	require.NoError(t, srv.Start())
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	q := new(dns.Msg)
	q.SetQuestion("dns.test.", dns.TypeHTTPS)
	r, err := dns.Exchange(q, srv.Addr("udp").String())
	require.NoError(t, err)
	list := ech.InAnswer(r.Answer)
	require.NotNil(t, list)

	_, port, _ := net.SplitHostPort(srv.Addr("web").String())
	ask := func(url string, list []byte) (*transport.Record, error) {
		tr, err := transport.New(url, transport.Options{RootCAs: roots, SNI: "dns.test", ECHConfigList: list, Timeout: 5 * time.Second})
		require.NoError(t, err)
		defer tr.Close()
		q := new(dns.Msg)
		q.SetQuestion("example.com.", dns.TypeA)
		return tr.Exchange(context.Background(), q)
	}
	for _, url := range []string{"https://127.0.0.1:" + port + "/dns-query", "h3://127.0.0.1:" + port + "/dns-query"} {
		// The exchange before's connection record falls before the mark,
		// not among this one's, however late a busy server writes it.
		srv.Settle(context.Background())
		mark := log.Mark()
		rec, err := ask(url, list)
		require.NoError(t, err, url)
		require.Equal(t, ech.Accepted, rec.Conn.ECH, url)
		require.Equal(t, "1.3", rec.Conn.TLSVersion)
		srv.Settle(context.Background())
		var conns []*server.Record
		for _, r := range log.Since(mark) {
			if r.Kind == "conn" {
				conns = append(conns, r)
			}
		}
		require.Len(t, conns, 1, url)
		require.Equal(t, "public.test", conns[0].OuterSNI, "%s: the network saw the public name", url)
		require.Equal(t, "dns.test", conns[0].SNI, url)

		rec, err = ask(url, nil)
		require.NoError(t, err, url)
		require.Empty(t, rec.Conn.ECH, "%s: nothing offered", url)
	}
	require.NoError(t, srv.RotateECH())
	require.NoError(t, srv.RotateECH())
	rec, err := ask("https://127.0.0.1:"+port+"/dns-query", list)
	require.Error(t, err, "a stale config is a failed exchange")
	require.Equal(t, ech.Rejected, rec.Conn.ECH)
	require.Contains(t, rec.Error, "ECH")
	rec, err = ask("h3://127.0.0.1:"+port+"/dns-query", list)
	require.Error(t, err)
	require.Equal(t, ech.Rejected, rec.Conn.ECH, "over QUIC too: %s", rec.Error)
}

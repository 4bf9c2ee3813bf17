package server_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestClosedServersLeaveNothingRunning: an experiment starts a server a
// cell, and a campaign's page task a stub; a server closed with clients
// still connected on every listener (and its forwarder's connection to
// an upstream that stays) leaves the process's goroutines where they
// were.
func TestClosedServersLeaveNothingRunning(t *testing.T) {
	// The upstream outlives the servers, as a measured resolver does;
	// forwarded to over DoT, whose connections no worker pool serves
	// (a pool's idle workers stay up to 10 s).
	up := start(t, nil)
	lo := "127.0.0.1:0"
	cycle := func() {
		t.Helper()
		srv, err := server.New(&server.Config{Listen: server.Listen{UDP: lo, TCP: lo, DoT: lo, DoH: lo, DoH3: lo, DoQ: lo, Web: lo},
			Answers: server.Answers{Forward: up.url("dot"), ForwardRoots: up.pool().RootCAs, Cache: true}})
		require.NoError(t, err)
		require.NoError(t, srv.Start())
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(srv.CertPEM())
		a := func(n string) string { return srv.Addr(n).String() }
		var open []transport.Transport
		for _, url := range []string{"udp://" + a("udp"), "tcp://" + a("tcp"), "tls://" + a("dot"), "https://" + a("doh") + "/dns-query",
			"h3://" + a("doh3") + "/dns-query", "quic://" + a("doq"), "h3://" + a("web") + "/dns-query"} {
			tr, err := transport.New(url, transport.Options{Reuse: true, RootCAs: roots, Timeout: 5 * time.Second})
			require.NoError(t, err)
			q := new(dns.Msg)
			q.SetQuestion("leak.test.", dns.TypeA)
			rec, err := tr.Exchange(context.Background(), q)
			require.NoError(t, err, url)
			require.Equal(t, transport.StatusOK, rec.Status, url)
			open = append(open, tr) // still connected when the server closes
		}
		require.NoError(t, srv.Close())
		for _, tr := range open {
			tr.Close()
		}
	}
	testutil.NoGrowth(t, 3, cycle)
}

package transport_test

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestClosedTransportsLeaveNothingRunning: a campaign worker makes a
// transport a task, for a year; one that left a goroutine behind when
// closed (a connection's reader, a QUIC transport, an HTTP/2 pool) would
// pile them up. Every transport, each condition's way (reused, fresh,
// resumed in a session), closed after its exchanges, leaves the
// process's goroutines where they were.
func TestClosedTransportsLeaveNothingRunning(t *testing.T) {
	lo := "127.0.0.1:0"
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: lo, TCP: lo, DoT: lo, DoH: lo, DoH3: lo, DoQ: lo},
		Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	a := func(n string) string { return srv.Addr(n).String() }
	urls := []string{"udp://" + a("udp"), "tcp://" + a("tcp"), "tls://" + a("dot"), "https://" + a("doh") + "/dns-query",
		"h3://" + a("doh3") + "/dns-query", "quic://" + a("doq")}
	// By condition, so that the race lane can leave out 0-RTT, where
	// quic-go races with itself (Makefile, RACE_SKIP).
	for _, c := range []struct {
		name string
		opts func() transport.Options
	}{
		{"reused", func() transport.Options { return transport.Options{Reuse: true} }},
		{"fresh", func() transport.Options { return transport.Options{} }},
		{"http1.1", func() transport.Options { return transport.Options{Reuse: true, HTTPVersion: "1.1"} }},
		{"0rtt", func() transport.Options {
			return transport.Options{ZeroRTT: true, Session: transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true})}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testutil.NoGrowth(t, 3, func() {
				t.Helper()
				for _, url := range urls {
					opts := c.opts()
					opts.RootCAs, opts.Timeout = roots, 5*time.Second
					if opts.HTTPVersion != "" && !strings.HasPrefix(url, "https") {
						continue
					}
					tr, err := transport.New(url, opts)
					require.NoError(t, err)
					for range 3 {
						q := new(dns.Msg)
						q.SetQuestion("leak.test.", dns.TypeA)
						rec, err := tr.Exchange(context.Background(), q)
						require.NoError(t, err, url)
						require.Equal(t, transport.StatusOK, rec.Status, url)
					}
					require.NoError(t, tr.Close(), url)
				}
			})
		})
	}
}

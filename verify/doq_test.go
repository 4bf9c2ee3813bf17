package verify_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/peertest"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/verify"
)

// TestVerifyDoQInTestbed verifies server hosts with different
// configurations in the testbed: a plain DoQ server, one that always
// sends Retry and refuses 0-RTT, a QUIC server that speaks only HTTP/3,
// and a closed port.
func TestVerifyDoQInTestbed(t *testing.T) {
	if os.Geteuid() != 0 {
		peertest.Missing(t, "the testbed needs root")
	}
	tb, err := testbed.Start(testbed.Spec{Name: "verifytest", Hosts: []string{"client", "plain", "retry", "h3only", "closed"}})
	require.NoError(t, err)
	defer tb.Close()
	start := func(host string, cfg *server.Config) {
		require.NoError(t, cfg.Validate())
		var srv *server.Server
		require.NoError(t, tb.Run(host, func() error {
			var err error
			if srv, err = server.New(cfg); err == nil {
				err = srv.Start()
			}
			return err
		}))
		t.Cleanup(func() { srv.Close() })
	}
	any := server.Answers{Any: "192.0.2.1"}
	start("plain", &server.Config{Listen: server.Listen{DoQ: tb.IPs["plain"] + ":853"}, Answers: any})
	start("retry", &server.Config{Listen: server.Listen{DoQ: tb.IPs["retry"] + ":853"}, Answers: any, QUIC: server.QUIC{Retry: "always", NoZeroRTT: true}})
	start("h3only", &server.Config{Listen: server.Listen{DoH3: tb.IPs["h3only"] + ":853"}, Answers: any})
	opts := verify.Options{OpenSockets: func(open func() error) error { return tb.Run("client", open) }}
	v := func(host string) *verify.DoQ {
		return verify.VerifyDoQ(context.Background(), tb.IPs[host]+":853", opts)
	}

	r := v("plain")
	require.Equal(t, "doq", r.Verdict, r.Error)
	require.Equal(t, "NOERROR", r.Rcode)
	require.Equal(t, "doq", r.ALPN)
	require.Equal(t, "v1", r.QUICVersion)
	require.Contains(t, r.Offered, "0x6b3343cf", "QUIC v2 offered in Version Negotiation")
	require.True(t, r.Resumed)
	require.True(t, r.ZeroRTT, "a second connection's 0-RTT accepted")
	require.Positive(t, r.TicketLifetimeS)
	require.False(t, r.Retry)
	require.NotNil(t, r.Cert)
	require.Equal(t, "ECDSA", r.Cert.KeyType)
	require.Positive(t, r.Cert.Octets)

	r = v("retry")
	require.Equal(t, "doq", r.Verdict, r.Error)
	require.True(t, r.Retry)
	require.True(t, r.TokenAccepted, "the NEW_TOKEN token spares the second connection a Retry")
	require.False(t, r.ZeroRTT, "0-RTT refused")

	r = v("h3only")
	require.Equal(t, "quic-not-doq", r.Verdict, "QUIC, but no DoQ ALPN: %s", r.Error)
	require.NotEmpty(t, r.Offered)

	r = v("closed")
	require.Equal(t, "no-quic", r.Verdict)
}

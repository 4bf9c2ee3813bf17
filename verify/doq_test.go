package verify_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/verify"
)

// TestVerifyDoQInTestbed verifies server hosts with different
// configurations in the testbed: a plain DoQ server, one that always
// sends Retry and refuses 0-RTT, a QUIC server that speaks only HTTP/3,
// and a closed port.
func TestVerifyDoQInTestbed(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	tb, err := testbed.Start(testbed.Spec{Name: "verifytest", Hosts: []string{"client", "plain", "retry", "h3only", "draft", "v2", "draft29", "closed"}})
	require.NoError(t, err)
	defer tb.Close()
	start := func(host string, cfg *server.Config) {
		srv, err := server.StartIn(cfg, func(f func() error) error { return tb.Run(host, f) })
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
	}
	any := server.Answers{Any: "192.0.2.1"}
	start("plain", &server.Config{Listen: server.Listen{DoQ: tb.IPs["plain"] + ":853"}, Answers: any})
	start("retry", &server.Config{Listen: server.Listen{DoQ: tb.IPs["retry"] + ":853"}, Answers: any, QUIC: server.QUIC{Retry: "always", NoZeroRTT: true}})
	start("h3only", &server.Config{Listen: server.Listen{DoH3: tb.IPs["h3only"] + ":853"}, Answers: any})
	start("draft", &server.Config{Listen: server.Listen{DoQ: tb.IPs["draft"] + ":853"}, Answers: any, QUIC: server.QUIC{ALPNs: []string{"doq-i02"}}})
	start("v2", &server.Config{Listen: server.Listen{DoQ: tb.IPs["v2"] + ":853"}, Answers: any, QUIC: server.QUIC{Versions: []string{"v2"}}})
	// A draft-era server: QUIC draft-29 and ALPN doq-i02, on aioquic 0.9.25.
	if _, err := os.Stat(verify.DraftPython); err != nil {
		testutil.Missing(t, "aioquic 0.9.25 (scripts/install-peers.sh)")
	}
	cert := testutil.NewCert(t)
	srv := tb.Command("draft29", verify.DraftPython, "../internal/testutil/doq_draft_server.py", tb.IPs["draft29"], "853", cert.CertFile, cert.KeyFile, "ff00001d", "doq-i02")
	out, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	require.Equal(t, "ready\n", line)
	opts := verify.Options{OpenSockets: func(open func() error) error { return tb.Run("client", open) },
		Command: func(argv ...string) *exec.Cmd { return tb.Command("client", argv...) }}
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

	r = v("draft")
	require.Equal(t, "doq", r.Verdict, r.Error)
	require.Equal(t, "doq-i02", r.ALPN, "a draft server answers on its draft ALPN")

	r = v("v2")
	require.Equal(t, "doq", r.Verdict, r.Error)
	require.Equal(t, "v2", r.QUICVersion, "a v2-only server: Version Negotiation, then QUIC v2")
	require.Equal(t, []string{"0x6b3343cf"}, nonGrease(r.Offered))

	r = v("draft29")
	require.Equal(t, "doq", r.Verdict, r.Error)
	require.Equal(t, "draft-29", r.QUICVersion, "verified over the draft it offered")
	require.Equal(t, "doq-i02", r.ALPN)
	require.Equal(t, "NOERROR", r.Rcode)
	require.Contains(t, r.Offered, "0xff00001d")

	r = v("closed")
	require.Equal(t, "no-quic", r.Verdict)
}

// nonGrease drops the reserved versions quic-go adds to Version
// Negotiation (0x?a?a?a?a, RFC 9000 §15).
func nonGrease(vs []string) (out []string) {
	for _, v := range vs {
		var n uint32
		fmt.Sscanf(v, "0x%08x", &n)
		if n&0x0f0f0f0f != 0x0a0a0a0a {
			out = append(out, v)
		}
	}
	return out
}

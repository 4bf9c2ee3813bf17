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

// TestVerifyDoTAndDoHInTestbed surveys three server configurations: one
// with everything (DoT with ALPN, DoH on HTTP/1.1, /2 and /3 with Alt-Svc),
// one capped at TLS 1.2 without the DoT ALPN, and a JSON-only DoH server.
func TestVerifyDoTAndDoHInTestbed(t *testing.T) {
	if os.Geteuid() != 0 {
		peertest.Missing(t, "the testbed needs root")
	}
	tb, err := testbed.Start(testbed.Spec{Name: "surveytest", Hosts: []string{"client", "full", "tls12", "json"}})
	require.NoError(t, err)
	defer tb.Close()
	start := func(host string, cfg *server.Config) {
		cfg.Answers = server.Answers{Any: "192.0.2.1"}
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
	ip := tb.IPs
	start("full", &server.Config{Listen: server.Listen{DoT: ip["full"] + ":853", Web: ip["full"] + ":443"}})
	start("tls12", &server.Config{Listen: server.Listen{DoT: ip["tls12"] + ":853", DoH: ip["tls12"] + ":443"}, TLS: server.TLS{MaxVersion: "1.2", NoDoTALPN: true}})
	start("json", &server.Config{Listen: server.Listen{DoH: ip["json"] + ":443"}, DoHJSONOnly: true})
	o := verify.Options{OpenSockets: func(open func() error) error { return tb.Run("client", open) }}
	ctx := context.Background()

	dot := verify.VerifyDoT(ctx, ip["full"]+":853", o)
	require.True(t, dot.Answers, dot.Error)
	require.True(t, dot.ALPNDoT)
	require.True(t, dot.NoALPN)
	require.Equal(t, "1.3", dot.TLS)
	doh := verify.VerifyDoH(ctx, ip["full"]+":443", o)
	require.Equal(t, []string{"/dns-query application/dns-message GET", "/dns-query application/dns-message POST", "/dns-query application/dns-json GET"}, doh.Endpoints)
	require.True(t, doh.HTTP11 && doh.HTTP2 && doh.HTTP3, "%+v", doh)
	require.Contains(t, doh.AltSvc, "h3=")
	require.Equal(t, []string{"1.2", "1.3"}, doh.TLSVersions)

	dot = verify.VerifyDoT(ctx, ip["tls12"]+":853", o)
	require.True(t, dot.Answers, dot.Error)
	require.False(t, dot.ALPNDoT, "no DoT ALPN")
	require.Equal(t, "1.2", dot.TLS)
	doh = verify.VerifyDoH(ctx, ip["tls12"]+":443", o)
	require.Equal(t, []string{"1.2"}, doh.TLSVersions)
	require.False(t, doh.HTTP3)
	require.Empty(t, doh.AltSvc)

	doh = verify.VerifyDoH(ctx, ip["json"]+":443", o)
	require.Equal(t, []string{"/dns-query application/dns-json GET"}, doh.Endpoints)
	require.Empty(t, verify.VerifyDoT(ctx, ip["json"]+":853", o).TLS, "no DoT there")
}

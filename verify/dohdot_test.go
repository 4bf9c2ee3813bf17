package verify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/verify"
)

// TestVerifyDoTAndDoHInTestbed surveys three server configurations: one
// with everything (DoT with ALPN, DoH on HTTP/1.1, /2 and /3 with Alt-Svc),
// one capped at TLS 1.2 without the DoT ALPN, and a JSON-only DoH server.
func TestVerifyDoTAndDoHInTestbed(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	tb, err := testbed.Start(testbed.Spec{Name: "surveytest", Hosts: []string{"client", "full", "tls12", "json"}})
	require.NoError(t, err)
	defer tb.Close()
	start := func(host string, cfg *server.Config) {
		cfg.Answers = server.Answers{Any: "192.0.2.1", Static: []string{`dns.survey.test. 300 IN CAA 0 issue "ca.example"`, "dns.survey.test. 300 IN HTTPS 1 . alpn=h2"}}
		srv, err := server.StartIn(cfg, func(f func() error) error { return tb.Run(host, f) })
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
	}
	ip := tb.IPs
	cert, key := surveyCert(t)
	// TCP Fast Open as a server needs the kernel's consent in that host.
	require.NoError(t, tb.Run("full", func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_fastopen", []byte("3"), 0o644) }))
	start("full", &server.Config{Listen: server.Listen{DoT: ip["full"] + ":853", Web: ip["full"] + ":443"}, TLS: server.TLS{Cert: cert, Key: key},
		Limits: server.Limits{TCPFastOpen: true}, ODoH: server.ODoH{Target: true}, Web: server.Web{ECH: server.ECH{PublicName: "public.survey.test"}}})
	start("tls12", &server.Config{Listen: server.Listen{DoT: ip["tls12"] + ":853", DoH: ip["tls12"] + ":443"}, TLS: server.TLS{MaxVersion: "1.2", NoDoTALPN: true}})
	start("json", &server.Config{Listen: server.Listen{DoH: ip["json"] + ":443"}, DoHJSONOnly: true})
	o := verify.Options{OpenSockets: func(open func() error) error { return tb.Run("client", open) }}
	ctx := context.Background()

	dot := verify.VerifyDoT(ctx, ip["full"]+":853", o)
	require.True(t, dot.Answers, dot.Error)
	require.True(t, dot.ALPNDoT)
	require.True(t, dot.NoALPN)
	require.Equal(t, "1.3", dot.TLS)
	require.Positive(t, dot.TicketLifetimeS, "Go's servers give tickets a lifetime (7 days)")
	require.True(t, dot.Cert.SCT, "an embedded SCT list")
	require.True(t, dot.Cert.MustStaple)
	require.True(t, dot.FastOpen, "the second connection's SYN carried the ClientHello")
	doh := verify.VerifyDoH(ctx, ip["full"]+":443", o)
	require.Equal(t, []string{"/dns-query application/dns-message GET", "/dns-query application/dns-message POST", "/dns-query application/dns-json GET"}, doh.Endpoints)
	require.True(t, doh.HTTP11 && doh.HTTP2 && doh.HTTP3, "%+v", doh)
	require.Contains(t, doh.AltSvc, "h3=")
	require.Equal(t, []string{"1.2", "1.3"}, doh.TLSVersions)
	require.Equal(t, []string{`0 issue "ca.example"`}, doh.CAA, "the resolver answers CAA for its certificate's name")
	require.False(t, doh.OCSPStapled)
	require.NotNil(t, doh.ODoH, "an ODoH target config")
	require.Equal(t, uint16(0x0020), doh.ODoH.KEM)
	require.True(t, doh.ODoHAnswers, "a query sealed to it was answered")
	require.Equal(t, "public.survey.test", doh.ECH, "its name's HTTPS record carries an ECH config")
	require.Equal(t, doh.ODoH, doh.ODoHInHTTPS, "and the ODoH config its well-known URI publishes")

	dot = verify.VerifyDoT(ctx, ip["tls12"]+":853", o)
	require.True(t, dot.Answers, dot.Error)
	require.False(t, dot.ALPNDoT, "no DoT ALPN")
	require.Equal(t, "1.2", dot.TLS)
	require.False(t, dot.FastOpen)
	doh = verify.VerifyDoH(ctx, ip["tls12"]+":443", o)
	require.Equal(t, []string{"1.2"}, doh.TLSVersions)
	require.False(t, doh.HTTP3)
	require.Empty(t, doh.AltSvc)
	require.Nil(t, doh.ODoH)
	require.Empty(t, doh.ECH)
	require.Nil(t, doh.ODoHInHTTPS)

	doh = verify.VerifyDoH(ctx, ip["json"]+":443", o)
	require.Equal(t, []string{"/dns-query application/dns-json GET"}, doh.Endpoints)
	require.Empty(t, verify.VerifyDoT(ctx, ip["json"]+":853", o).TLS, "no DoT there")
	require.False(t, doh.Cert.MustStaple, "doxlab's generated certificate has neither")
	require.False(t, doh.Cert.SCT)
}

// surveyCert makes a certificate with an embedded SCT list extension and
// the OCSP Must-Staple TLS feature (RFC 7633), for dns.survey.test.
func surveyCert(t *testing.T) (certFile, keyFile string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	feature, err := asn1.Marshal([]int{5})
	require.NoError(t, err)
	sct, err := asn1.Marshal([]byte{0, 0}) // an empty SCT list: only the extension's presence is checked
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dns.survey.test"}, DNSNames: []string{"dns.survey.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 24}, Value: feature},
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}, Value: sct}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/server"
)

const echPublic = "public.test"

// echServer serves site.test on the web listener with ECH under
// echPublic, and its HTTPS record; more changes the config further.
func echServer(t *testing.T, more ...func(*server.Config)) *testServer {
	site := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(site, "index.html"), []byte("inner"), 0o644))
	return start(t, func(c *server.Config) {
		c.Listen = server.Listen{UDP: "127.0.0.1:0", Web: "127.0.0.1:0"}
		c.Answers = server.Answers{Static: []string{"site.test. 60 IN HTTPS 1 . alpn=h3,h2", "site.test. 60 IN A 127.0.0.1", "bare.test. 60 IN HTTPS 1 . alpn=h3 ech=AEn+DQBFKwAgACABWIHUGj4u+PIggYXcR5JF0gYk3dCRioBW8uJq9H4mKAAIAAEAAQABAANAEnB1YmxpYy50bHMtZWNoLmRldgAA"}}
		c.TLS.Names = []string{"site.test"}
		c.Web.Roots = map[string]string{"site.test": site}
		c.Web.ECH.PublicName = echPublic
		for _, m := range more {
			m(c)
		}
	})
}

// overHTTP are the web listener's two HTTP versions, as its conn
// records name them and echGet asks over them.
var overHTTP = []struct {
	label string
	h3    bool
}{{"h2", false}, {"h3", true}}

// echConfigOf asks the server's UDP listener for name's HTTPS record and
// returns its ech= value.
func echConfigOf(t *testing.T, ts *testServer, name string) []byte {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeHTTPS)
	r, err := dns.Exchange(q, ts.Addr("udp").String())
	require.NoError(t, err)
	require.Len(t, r.Answer, 1)
	for _, kv := range r.Answer[0].(*dns.HTTPS).Value {
		if e, ok := kv.(*dns.SVCBECHConfig); ok {
			return e.ECH
		}
	}
	t.Fatalf("no ech= in %s", r.Answer[0])
	return nil
}

// echGet fetches site.test's page over HTTP/2 or HTTP/3 with the given
// ECH config list (none when nil) and returns the body.
func echGet(t *testing.T, ts *testServer, h3 bool, list []byte) (string, error) {
	t.Helper()
	pem, err := os.ReadFile(ts.caFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	conf := &tls.Config{ServerName: "site.test", RootCAs: roots, EncryptedClientHelloConfigList: list, MinVersion: tls.VersionTLS13}
	addr := ts.Addr("web").String()
	var rt http.RoundTripper
	if h3 {
		tr := &http3.Transport{TLSClientConfig: conf, Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr, tc, qc)
		}}
		defer tr.Close()
		rt = tr
	} else {
		conf.NextProtos = []string{"h2"}
		tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		defer tr.CloseIdleConnections()
		rt = tr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://site.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// lastConn is the web listener's newest conn record of transport, once
// there is one more than seen.
func lastConn(t *testing.T, ts *testServer, transport string, seen int) server.Record {
	t.Helper()
	var recs []server.Record
	require.Eventually(t, func() bool {
		recs = ts.records("conn", transport)
		return len(recs) > seen
	}, 5*time.Second, 10*time.Millisecond, "a conn record on %s", transport)
	return recs[len(recs)-1]
}

// TestECH: the web listener publishes its ECH config in the HTTPS
// records of its own data, accepts it on HTTP/2 and HTTP/3 (records name
// the outer and the inner server names), still accepts the config of one
// rotation ago, and answers one two rotations old with retry configs
// that work; a client without ECH is recorded as offering none.
func TestECH(t *testing.T) {
	t.Cleanup(server.LagRecords(50 * time.Millisecond)) // as a busy machine would
	ts := echServer(t)
	list := echConfigOf(t, ts, "site.test.")
	configs, err := ech.Parse(list)
	require.NoError(t, err)
	require.Len(t, configs, 1)
	require.Equal(t, echPublic, configs[0].PublicName)
	require.Equal(t, uint16(0x0020), configs[0].KEM, "X25519")
	other, err := ech.Parse(echConfigOf(t, ts, "bare.test."))
	require.NoError(t, err)
	require.Equal(t, "public.tls-ech.dev", other[0].PublicName, "a record's own ech= stays")

	for _, c := range overHTTP {
		t.Run(c.label, func(t *testing.T) {
			seen := len(ts.records("conn", c.label))
			body, err := echGet(t, ts, c.h3, list)
			require.NoError(t, err)
			require.Equal(t, "inner", body)
			rec := lastConn(t, ts, c.label, seen)
			require.Equal(t, ech.Accepted, rec.ECH)
			require.Equal(t, echPublic, rec.OuterSNI, "the network saw the public name")
			require.Equal(t, "site.test", rec.SNI, "the server saw the site's")

			seen = len(ts.records("conn", c.label))
			_, err = echGet(t, ts, c.h3, nil)
			require.NoError(t, err)
			rec = lastConn(t, ts, c.label, seen)
			require.Equal(t, ech.GREASE, rec.ECH, "Go's client, as browsers, offers GREASE without a config")
			require.Equal(t, "site.test", rec.OuterSNI)
		})
	}

	require.NoError(t, ts.RotateECH())
	seen := len(ts.records("conn", "h2"))
	_, err = echGet(t, ts, false, list)
	require.NoError(t, err, "the config of one rotation ago is still accepted")
	// Its record comes when the server sees the conn close, so wait for
	// it: counted late, it would pass for the rejected conn's below.
	require.Equal(t, ech.Accepted, lastConn(t, ts, "h2", seen).ECH)
	require.NotEqual(t, list, echConfigOf(t, ts, "site.test."), "the record carries the new config")

	require.NoError(t, ts.RotateECH())
	for _, c := range overHTTP {
		seen = len(ts.records("conn", c.label))
		_, err = echGet(t, ts, c.h3, list)
		var rej *tls.ECHRejectionError
		require.True(t, errors.As(err, &rej), "%s: a stale config is rejected: %v", c.label, err)
		retry, err := ech.Parse(rej.RetryConfigList)
		require.NoError(t, err)
		require.Equal(t, echConfigOf(t, ts, "site.test."), rej.RetryConfigList, "%s: the retry config is the current one", c.label)
		require.Equal(t, echPublic, retry[0].PublicName)
		rec := lastConn(t, ts, c.label, seen)
		require.Equal(t, ech.Rejected, rec.ECH, c.label)
		require.Equal(t, echPublic, rec.OuterSNI, c.label)
		require.NotEmpty(t, rec.Error, "%s: the client aborted", c.label)

		body, err := echGet(t, ts, c.h3, rej.RetryConfigList)
		require.NoError(t, err, "%s: the retry configs work", c.label)
		require.Equal(t, "inner", body)
	}
}

// TestECHKeyFile: with web.ech.key_file a restart publishes the config
// it published before, so clients holding it (and resolvers caching its
// HTTPS record) connect with ECH accepted; the seed is created once,
// readable by the server's user alone; a file too short to be a seed is
// an error, not a weaker key. Without it each start has a fresh key.
func TestECHKeyFile(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "ech.key")
	withKey := func(c *server.Config) { c.Web.ECH.KeyFile = keyFile }
	first := echServer(t, withKey)
	list := echConfigOf(t, first, "site.test.")
	fi, err := os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.EqualValues(t, 32, fi.Size())
	first.Close()

	again := echServer(t, withKey)
	require.Equal(t, list, echConfigOf(t, again, "site.test."), "the restart publishes the same config")
	for _, c := range overHTTP {
		seen := len(again.records("conn", c.label))
		body, err := echGet(t, again, c.h3, list)
		require.NoError(t, err, "%s: a config from before the restart", c.label)
		require.Equal(t, "inner", body)
		require.Equal(t, ech.Accepted, lastConn(t, again, c.label, seen).ECH, c.label)
	}
	require.NotEqual(t, list, echConfigOf(t, echServer(t), "site.test."), "without a key file, a fresh key")

	short := filepath.Join(t.TempDir(), "short.key")
	require.NoError(t, os.WriteFile(short, make([]byte, 10), 0o600))
	cfg := &server.Config{Listen: server.Listen{Web: "127.0.0.1:0"}, Web: server.Web{ECH: server.ECH{PublicName: echPublic, KeyFile: short}}}
	_, err = server.New(cfg)
	require.ErrorContains(t, err, "holds 10 octets, want 32")
}

// TestECHRotatesOnItsTimer: with web.ech.rotate the server makes new keys
// on its own, again and again, and publishes each; a client holding the
// config just replaced gets through (TestECH shows it accepted as it
// stands; here the timer may have turned once more, and then the retry
// configs it is sent are the current ones).
func TestECHRotatesOnItsTimer(t *testing.T) {
	ts := echServer(t, func(c *server.Config) { c.Web.ECH.Rotate = time.Second })
	seen := [][]byte{echConfigOf(t, ts, "site.test.")}
	for len(seen) < 3 {
		var now []byte
		require.Eventually(t, func() bool {
			now = echConfigOf(t, ts, "site.test.")
			return !bytes.Equal(now, seen[len(seen)-1])
		}, 10*time.Second, 50*time.Millisecond, "rotation %d", len(seen))
		seen = append(seen, now)
		body, err := echGet(t, ts, false, seen[len(seen)-2])
		var rej *tls.ECHRejectionError
		if errors.As(err, &rej) {
			body, err = echGet(t, ts, false, rej.RetryConfigList)
		}
		require.NoError(t, err)
		require.Equal(t, "inner", body)
	}
	require.NotEqual(t, seen[0], seen[2])
}

// TestECHConfigErrors: ECH needs the web listener and a DNS name.
func TestECHConfigErrors(t *testing.T) {
	for _, c := range []struct {
		mutate func(*server.Config)
		want   string
	}{
		{func(c *server.Config) { c.Web.ECH.PublicName = "public.test" }, "needs listen.web"},
		{func(c *server.Config) { c.Listen.Web = "127.0.0.1:0"; c.Web.ECH.PublicName = "192.0.2.1" }, "not a host name"},
		{func(c *server.Config) { c.Listen.Web = "127.0.0.1:0"; c.Web.ECH.KeyFile = "k" }, "not a host name"},
		{func(c *server.Config) { c.Listen.Web = "127.0.0.1:0"; c.Web.ECH.PublicName = "cover_name.test" }, "not a host name"}, // clients would ignore its configs
		{func(c *server.Config) {
			c.Listen.Web = "127.0.0.1:0"
			c.Web.ECH.PublicName = "p.test"
			c.Web.ECH.Rotate = time.Millisecond
		}, "at least 1s"},
	} {
		cfg := &server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}}
		c.mutate(cfg)
		_, err := server.New(cfg)
		require.ErrorContains(t, err, c.want)
	}
}

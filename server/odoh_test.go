package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/odoh"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// odohServer is a server that is an ODoH target and a proxy relaying to
// 127.0.0.1, on DoH (HTTP/1.1 and /2), DoH/3 and the web listener, with
// a CA-signed certificate the proxy trusts.
func odohServer(t *testing.T, mutate func(*server.Config)) (*testServer, *testutil.CA) {
	ca := testutil.NewCA(t, "localhost")
	ts := start(t, func(c *server.Config) {
		c.Listen = server.Listen{DoH: "127.0.0.1:0", DoH3: "127.0.0.1:0", Web: "127.0.0.1:0"}
		c.TLS.Cert, c.TLS.Key = ca.CertFile, ca.KeyFile
		c.ODoH = server.ODoH{Target: true, Proxy: true, ProxyTargets: []string{"127.0.0.1"}, ProxyCA: ca.CAFile}
		if mutate != nil {
			mutate(c)
		}
	})
	return ts, ca
}

func caPool(t *testing.T, ca *testutil.CA) *x509.CertPool {
	pem, err := os.ReadFile(ca.CAFile)
	require.NoError(t, err)
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}

// TestODoH asks through the server's proxy to its own target over every
// endpoint and HTTP version that serves ODoH: the answer comes back,
// the client's record has both hops (the proxy's target exchange from
// Server-Timing) and its HPKE work, and the server's records show the
// proxy's relay (with no name: it cannot see one) and the target's query.
func TestODoH(t *testing.T) {
	ts, ca := odohServer(t, nil)
	target := ts.Addr("doh").String() + "/dns-query"
	for _, c := range []struct{ listener, http string }{{"doh", "2"}, {"doh", "1.1"}, {"doh3", "3"}, {"web", "2"}, {"web", "3"}} {
		t.Run(c.listener+"/"+c.http, func(t *testing.T) {
			before := len(ts.records("proxy", "odoh"))
			u := "odoh://" + ts.Addr(c.listener).String() + "/dns-query?target=" + target
			rec := ask(t, u, transport.Options{RootCAs: caPool(t, ca), HTTPVersion: c.http, Timeout: 5 * time.Second}, "s.example")
			require.Equal(t, "odoh", rec.Protocol)
			require.Equal(t, transport.StatusOK, rec.Status)
			require.Contains(t, rec.Answers[0], anyIP)
			require.NotNil(t, rec.ODoH)
			require.Equal(t, ts.Addr("doh").String(), rec.ODoH.Target)
			require.Positive(t, rec.ODoH.TargetMs, "the proxy says how long the target took")
			require.Less(t, rec.ODoH.TargetMs, rec.Timing.TotalMs)
			require.Positive(t, rec.ODoH.Sealed.Sent)
			require.Greater(t, rec.ODoH.Sealed.Received, rec.DNSBytes.Received, "sealing adds octets")
			ts.Settle(context.Background())
			proxied := ts.records("proxy", "odoh")
			require.Len(t, proxied, before+1)
			p := proxied[len(proxied)-1]
			require.Equal(t, c.listener, p.Listener)
			require.Equal(t, ts.Addr("doh").String(), p.Target)
			require.Empty(t, p.QName, "the proxy sees no name")
			require.Empty(t, p.Error)
		})
	}
	queries := ts.records("query", "odoh")
	require.Len(t, queries, 5, "the target answered each")
	for _, q := range queries {
		require.Equal(t, "s.example.", q.QName)
		require.True(t, strings.HasPrefix(q.Remote, "127.0.0.1:"), "the target sees the proxy, which here is on the same address")
	}
}

// TestODoHRefusals: a proxy relays only to its targets, only POSTs, and
// says when a target is unreachable; a target answers a query sealed to
// another key 401 (then the client fetches the config anew); the config
// is fetched once per transport.
func TestODoHRefusals(t *testing.T) {
	ts, ca := odohServer(t, nil)
	roots := caPool(t, ca)
	proxy := "https://" + ts.Addr("doh").String() + "/dns-query"
	post := func(query string, body []byte) int {
		req, _ := http.NewRequest(http.MethodPost, proxy+query, bytes.NewReader(body))
		req.Header.Set("Content-Type", odoh.ContentType)
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("?targethost=odoh.example&targetpath=/dns-query", []byte{1}), "not one of its targets")
	require.Equal(t, http.StatusBadRequest, post("?targethost=127.0.0.1&targetpath=dns-query", []byte{1}), "a path without /")
	require.Equal(t, http.StatusBadGateway, post("?targethost=127.0.0.1:1&targetpath=/dns-query", []byte{1}), "nothing listens there")
	require.Equal(t, http.StatusBadRequest, post("", []byte{1, 2, 3}), "a malformed message to the target")
	require.NotEmpty(t, ts.records("refusal", ""))
	stranger, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	sealed, _, err := odoh.Seal(stranger.Config, []byte("\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01"), 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, post("", sealed), "sealed to another key: the client should fetch the config anew")

	tr, err := transport.New("odoh://"+ts.Addr("doh").String()+"/dns-query?target="+ts.Addr("web").String(), transport.Options{RootCAs: roots, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer tr.Close()
	rec, err := tr.Exchange(context.Background(), query("a.example"))
	require.NoError(t, err)
	require.Positive(t, rec.ODoH.ConfigMs, "the first exchange fetched the config")
	rec, err = tr.Exchange(context.Background(), query("a.example"))
	require.NoError(t, err)
	require.Zero(t, rec.ODoH.ConfigMs, "the second reused it")
}

// TestODoHProxyOverHTTP3: with odoh.proxy_http "3" the proxy relays to
// its target over HTTP/3 (the web listener's UDP side; the client
// fetches the target's config from its TCP side) and keeps that QUIC
// connection for the next relay; a target with nothing on UDP at its
// port is a timeout (504: no refusal comes back over QUIC, where TCP's
// is a 502). The client's own hop stays HTTP/2.
func TestODoHProxyOverHTTP3(t *testing.T) {
	ts, ca := odohServer(t, func(c *server.Config) { c.ODoH.ProxyHTTP, c.ODoH.ProxyTimeout = "3", 2*time.Second })
	roots := caPool(t, ca)
	u := "odoh://" + ts.Addr("doh").String() + "/dns-query?target=" + ts.Addr("web").String() + "/dns-query"
	for i := range 3 {
		rec := ask(t, u, transport.Options{RootCAs: roots, Timeout: 5 * time.Second}, fmt.Sprintf("h%d.example", i))
		require.Equal(t, transport.StatusOK, rec.Status)
		require.Equal(t, "h2", rec.Conn.ALPN, "the client's hop")
		require.Positive(t, rec.ODoH.TargetMs)
	}
	ts.Settle(context.Background())
	queries := ts.records("query", "odoh")
	require.Len(t, queries, 3)
	for _, q := range queries {
		require.Equal(t, "web", q.Listener)
	}
	var h3 []server.Record
	for _, c := range ts.records("conn", "h3") {
		if c.Listener == "web" {
			h3 = append(h3, c)
		}
	}
	require.Len(t, h3, 1, "one QUIC connection from the proxy to its target, kept for every relay")

	// Nothing on UDP at the DoH (TCP) listener's port, unless the kernel
	// gave both the same number.
	if ts.port("doh") != ts.port("doh3") {
		require.Equal(t, http.StatusGatewayTimeout, postODoH(t, roots, "doh", ts.Addr("doh").String()+"/dns-query?targethost="+ts.Addr("doh").String()+"&targetpath=/dns-query"))
	}
}

// TestODoHConfig: ODoH's settings are checked whole.
func TestODoHConfig(t *testing.T) {
	for _, c := range []struct {
		odoh server.ODoH
		want string
	}{
		{server.ODoH{Proxy: true}, "name its targets"},
		{server.ODoH{Proxy: true, ProxyTargets: []string{"a/b"}}, "not a host"},
		{server.ODoH{Target: true, ProxyHTTP: "4"}, `not "2" or "3"`},
		{server.ODoH{KeyFile: "k"}, "neither odoh.target nor odoh.proxy"},
	} {
		_, err := server.New(&server.Config{Listen: server.Listen{DoH: "127.0.0.1:0"}, ODoH: c.odoh})
		require.ErrorContains(t, err, c.want)
	}
	_, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, ODoH: server.ODoH{Target: true}})
	require.ErrorContains(t, err, "needs a DoH endpoint")
}

// TestODoHThroughDoHProxy: doxlab's proxy relays to an independent ODoH
// target, DNSCrypt's doh-proxy (Rust, odoh-rs), which forwards to
// doxlab's Do53: doxlab's client seals to the config doh-proxy
// publishes, over HTTP/2 and HTTP/3 to the proxy, and opens its answers.
func TestODoHThroughDoHProxy(t *testing.T) {
	ca := testutil.NewCA(t, "localhost")
	ts := start(t, func(c *server.Config) {
		c.Listen = server.Listen{UDP: "127.0.0.1:0", DoH: "127.0.0.1:0", DoH3: "127.0.0.1:0"}
		c.TLS.Cert, c.TLS.Key = ca.CertFile, ca.KeyFile
		c.ODoH = server.ODoH{Proxy: true, ProxyTargets: []string{"127.0.0.1"}, ProxyCA: ca.CAFile}
	})
	target := testutil.StartDoHProxy(t, ca, ts.Addr("udp").String())
	for _, c := range []struct{ listener, http string }{{"doh", "2"}, {"doh3", "3"}} {
		u := "odoh://" + ts.Addr(c.listener).String() + "/dns-query?target=" + target + "/dns-query"
		rec := ask(t, u, transport.Options{RootCAs: caPool(t, ca), HTTPVersion: c.http, Timeout: 5 * time.Second}, "s.example")
		require.Equal(t, transport.StatusOK, rec.Status, c.listener)
		require.Contains(t, rec.Answers[0], anyIP, c.listener)
		require.Positive(t, rec.ODoH.TargetMs, c.listener)
	}
	require.Len(t, ts.records("proxy", "odoh"), 2, "both went through doxlab's proxy")
	require.Len(t, ts.records("query", "udp"), 2, "and doh-proxy asked doxlab's Do53")
}

// TestStubForwardsOverODoH: a stub (answers.forward) forwards over an
// odoh:// URL, so a browser's or a campaign's lookups through it go
// oblivious: the answer comes back, and the stub's record of the query
// keeps the upstream exchange with both hops.
func TestStubForwardsOverODoH(t *testing.T) {
	ts, ca := odohServer(t, nil)
	stub := start(t, func(c *server.Config) {
		c.Listen = server.Listen{UDP: "127.0.0.1:0"}
		c.Answers = server.Answers{Forward: "odoh://" + ts.Addr("doh").String() + "/dns-query?target=" + ts.Addr("web").String() + "/dns-query",
			ForwardCA: ca.CAFile, ForwardTimeout: 5 * time.Second}
	})
	rec := ask(t, "udp://"+stub.Addr("udp").String(), transport.Options{Timeout: 5 * time.Second}, "s.example")
	require.Contains(t, rec.Answers[0], anyIP)
	stub.Settle(context.Background())
	q := stub.records("query", "udp")
	require.Len(t, q, 1)
	require.NotNil(t, q[0].Upstream)
	require.Equal(t, "odoh", q[0].Upstream.Protocol)
	require.NotNil(t, q[0].Upstream.ODoH)
	require.Positive(t, q[0].Upstream.ODoH.TargetMs)
}

// TestODoHTargetRefused: a transport's Refuse (a campaign's blocklist)
// is asked of the ODoH target's address too, which the client contacts
// itself for the config: a refused target is never contacted, and the
// exchange says why.
func TestODoHTargetRefused(t *testing.T) {
	ts, ca := odohServer(t, func(c *server.Config) { c.ODoH.ProxyTargets = []string{"127.0.0.1", "127.0.0.2"} })
	target := start(t, func(c *server.Config) {
		c.Listen = server.Listen{DoH: "127.0.0.2:0"}
		c.TLS.Cert, c.TLS.Key = ca.CertFile, ca.KeyFile
		c.ODoH = server.ODoH{Target: true}
	})
	refuse := func(a netip.Addr) error {
		if a == netip.MustParseAddr("127.0.0.2") {
			return errors.New("on the blocklist")
		}
		return nil
	}
	u := "odoh://" + ts.Addr("doh").String() + "/dns-query?target=" + target.Addr("doh").String() + "/dns-query"
	tr, err := transport.New(u, transport.Options{RootCAs: caPool(t, ca), Timeout: 5 * time.Second, Refuse: refuse})
	require.NoError(t, err)
	defer tr.Close()
	rec, err := tr.Exchange(context.Background(), query("a.example"))
	require.Error(t, err)
	require.Equal(t, transport.StatusBlocked, rec.Status, rec.Error)
	require.Contains(t, rec.Error, "not contacting the ODoH target 127.0.0.2")
	target.Settle(context.Background())
	require.Empty(t, target.records("", ""), "the target saw nothing")
}

// TestODoHConfigsInHTTPSRecords: a target's own ServiceMode HTTPS
// records carry its ObliviousDoHConfigs under the drafts' odohconfig key
// (32769), the same configs as its well-known URI; an AliasMode record
// and a record that has the key already are left as they are, and a
// server that is no target adds none.
func TestODoHConfigsInHTTPSRecords(t *testing.T) {
	records := []string{"resolver.test. 60 IN HTTPS 1 . alpn=h2,h3", "alias.test. 60 IN HTTPS 0 resolver.test.", `own.test. 60 IN HTTPS 1 . alpn=h2 key32769="\000\000"`}
	ts, ca := odohServer(t, func(c *server.Config) {
		c.Listen.UDP = "127.0.0.1:0"
		c.Answers = server.Answers{Static: records}
	})
	httpsOf := func(ts *testServer, name string) *dns.Msg {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeHTTPS)
		r, err := dns.Exchange(q, ts.Addr("udp").String())
		require.NoError(t, err)
		require.Len(t, r.Answer, 1, name)
		return r
	}
	inRecord := odoh.InAnswer(httpsOf(ts, "resolver.test.").Answer)
	require.NotNil(t, inRecord)
	c, err := odoh.ParseConfigs(inRecord)
	require.NoError(t, err)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, ca)}}
	defer tr.CloseIdleConnections()
	published, err := odoh.FetchConfig(context.Background(), tr, "localhost:"+strings.Split(ts.Addr("doh").String(), ":")[1])
	require.NoError(t, err)
	require.Equal(t, published.KeyID(), c.KeyID(), "the record's config is the well-known one")
	require.Contains(t, httpsOf(ts, "resolver.test.").Answer[0].String(), `alpn="h2,h3" key32769=`, "the record's own params kept")

	require.Nil(t, odoh.InAnswer(httpsOf(ts, "alias.test.").Answer), "AliasMode names no service")
	require.Equal(t, []byte{0, 0}, odoh.InAnswer(httpsOf(ts, "own.test.").Answer), "a record's own value stays")

	plain := start(t, func(c *server.Config) {
		c.Listen = server.Listen{UDP: "127.0.0.1:0"}
		c.Answers = server.Answers{Static: records[:1]}
	})
	require.Nil(t, odoh.InAnswer(httpsOf(plain, "resolver.test.").Answer))
}

// TestODoHAnswerTooLargeToSeal: a DNS answer may be 65,535 octets, an
// ObliviousDoHMessage seals at most 65,515 of them. A target asked for
// a larger answer says so with an HTTP 500 (it panicked sealing it), and
// keeps answering: the next query, on the same transport, is answered.
func TestODoHAnswerTooLargeToSeal(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("big.test.", dns.TypeTXT)
	txt := func(last int) []string {
		var rrs []string
		for range 4 {
			rr := "big.test. 60 IN TXT"
			for range 64 {
				rr += ` "` + strings.Repeat("x", 250) + `"`
			}
			rrs = append(rrs, rr)
		}
		return append(rrs, `big.test. 60 IN TXT "`+strings.Repeat("y", last)+`"`)
	}
	// The answer's size, as the server packs it: 65,520 octets.
	size := func(last int) int {
		r := new(dns.Msg).SetReply(q)
		for _, s := range txt(last) {
			rr, err := dns.NewRR(s)
			require.NoError(t, err)
			r.Answer = append(r.Answer, rr)
		}
		r.Compress = true
		return r.Len()
	}
	// The last string's octets each add one to the answer, and each
	// 255 of them a length octet: a step, then a few back, not a
	// search from 1 (each size parses 64 KB of zone text, a hundred
	// tries took 12 s under the race detector).
	last := 1 + 65_520 - size(1)
	for size(last) > 65_520 {
		last--
	}
	require.Equal(t, 65_520, size(last))
	ts, ca := odohServer(t, func(c *server.Config) { c.Answers.Static = txt(last) })
	u := "odoh://" + ts.Addr("doh").String() + "/dns-query?target=" + ts.Addr("doh").String() + "/dns-query"
	tr, err := transport.New(u, transport.Options{RootCAs: caPool(t, ca), Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer tr.Close()
	rec, err := tr.Exchange(context.Background(), q)
	require.Error(t, err)
	require.Equal(t, transport.StatusHTTP, rec.Status, "%s", rec.Error)
	require.Equal(t, http.StatusInternalServerError, rec.Conn.HTTPStatus, "%s", rec.Error)
	rec, err = tr.Exchange(context.Background(), query("s.example"))
	require.NoError(t, err, "%s", rec.Error)
	require.Equal(t, transport.StatusOK, rec.Status)
}

// TestODoHProxyOddTargetStatus: a proxy hands the target's status back
// as it was (§4.3), but only a status a response can carry: a target
// that answers 000 or 099 (which Go's HTTP/1.1 client takes) is a bad
// gateway, on every listener, and the proxy keeps relaying.
func TestODoHProxyOddTargetStatus(t *testing.T) {
	ts, ca := odohServer(t, nil)
	cert, err := tls.LoadX509KeyPair(ca.CertFile, ca.KeyFile)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer ln.Close()
	status := make(chan string, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				fmt.Fprintf(c, "HTTP/1.1 %s Odd\r\nContent-Type: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", <-status, odoh.ContentType)
			}()
		}
	}()
	roots := caPool(t, ca)
	for _, listener := range []string{"doh", "doh3", "web"} {
		for _, code := range []string{"000", "099", "401"} {
			status <- code
			path := "/dns-query?targethost=" + ln.Addr().String() + "&targetpath=/dns-query"
			got := postODoH(t, roots, listener, ts.Addr(listener).String()+path)
			want := http.StatusBadGateway
			if code == "401" {
				want = http.StatusUnauthorized // a status a response carries goes back as it was
			}
			require.Equal(t, want, got, "%s: the target answered %s", listener, code)
		}
	}
	// The proxy still relays to its own target.
	rec := ask(t, "odoh://"+ts.Addr("doh").String()+"/dns-query?target="+ts.Addr("doh").String()+"/dns-query",
		transport.Options{RootCAs: roots, Timeout: 5 * time.Second}, "s.example")
	require.Equal(t, transport.StatusOK, rec.Status)
}

// postODoH POSTs a sealed-looking message to url on listener (HTTP/3
// for doh3) and returns the status.
func postODoH(t *testing.T, roots *x509.CertPool, listener, url string) int {
	t.Helper()
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	if listener == "doh3" {
		h3 := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer h3.Close()
		rt = h3
	}
	req, _ := http.NewRequest(http.MethodPost, "https://"+url, bytes.NewReader([]byte{1, 0, 0, 0, 0}))
	req.Header.Set("Content-Type", odoh.ContentType)
	resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err, "%s", listener)
	resp.Body.Close()
	return resp.StatusCode
}

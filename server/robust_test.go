//go:build unix

package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// TestDnsperfLoad puts a short, rate-limited load from dnsperf (Debian) on
// every transport it speaks; nothing may be lost.
func TestDnsperfLoad(t *testing.T) {
	bin := testutil.Need(t, "dnsperf", "apt-get install dnsperf")
	ts := start(t, nil)
	qfile := filepath.Join(t.TempDir(), "queries")
	var b strings.Builder
	for i := range 500 {
		b.WriteString("q" + strconv.Itoa(i) + ".example A\n")
	}
	require.NoError(t, os.WriteFile(qfile, []byte(b.String()), 0o644))
	lost := regexp.MustCompile(`Queries lost:\s+(\d+)`)
	done := regexp.MustCompile(`Queries completed:\s+(\d+)`)
	for mode, listener := range map[string]string{"udp": "udp", "tcp": "tcp", "dot": "dot", "doh": "doh"} {
		t.Run(mode, func(t *testing.T) {
			// -q 10 with one client: dnsperf's DoH takes one response per
			// TLS record, and stalled when a record held several (see serveH2).
			out, err := exec.Command(bin, "-s", "127.0.0.1", "-p", ts.port(listener), "-m", mode, "-d", qfile,
				"-l", "2", "-Q", "500", "-c", "1", "-q", "10").CombinedOutput()
			require.NoError(t, err, "%s", out)
			n, _ := strconv.Atoi(done.FindStringSubmatch(string(out))[1])
			require.Greater(t, n, 500, "%s", out)
			lostN, _ := strconv.Atoi(lost.FindStringSubmatch(string(out))[1])
			require.Zero(t, lostN, "%s", out)
		})
	}
}

// TestMalformedInput throws broken input at every listener; each must keep
// serving others.
func TestMalformedInput(t *testing.T) {
	ts := start(t, func(c *server.Config) { c.Limits.IdleTimeout = 2 * time.Second })
	alive := func() {
		t.Helper()
		for _, name := range []string{"udp", "tcp", "dot", "doh", "doh3", "doq"} {
			require.Equal(t, transport.StatusOK, ask(t, ts.url(name), ts.pool(), "alive.example").Status, name)
		}
	}

	// UDP: garbage and half messages get no answer.
	u, err := net.Dial("udp", ts.Addr("udp").String())
	require.NoError(t, err)
	for _, junk := range [][]byte{{1}, make([]byte, 11), []byte("\x00\x01garbage-garbage-garbage")} {
		u.Write(junk)
	}
	u.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = u.Read(make([]byte, 512))
	require.Error(t, err, "no answer to garbage")
	u.Close()

	// TCP: an unparsable message with a readable header gets FORMERR on
	// the same connection; a broken length closes the connection.
	c, err := net.Dial("tcp", ts.Addr("tcp").String())
	require.NoError(t, err)
	c.Write([]byte{0, 14, 0xbe, 0xef, 1, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var l [2]byte
	_, err = io.ReadFull(c, l[:])
	require.NoError(t, err)
	msg := make([]byte, binary.BigEndian.Uint16(l[:]))
	io.ReadFull(c, msg)
	r := new(dns.Msg)
	require.NoError(t, r.Unpack(msg))
	require.Equal(t, uint16(0xbeef), r.Id)
	require.Equal(t, dns.RcodeFormatError, r.Rcode)
	c.Write([]byte{0, 3, 1, 2, 3})
	_, err = c.Read(make([]byte, 10))
	require.Error(t, err, "broken framing closes the connection")
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "closed, not timed out: %v", err)
	c.Close()

	// DoT: a client that is not TLS.
	c, err = net.Dial("tcp", ts.Addr("dot").String())
	require.NoError(t, err)
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.ReadAll(c)
	c.Close()

	// DoH: bad requests get 4xx.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	base := "https://" + ts.Addr("doh").String()
	for _, tc := range []struct {
		method, path, ctype, body string
		code                      int
	}{
		{"GET", "/dns-query?dns=!!!", "", "", 400},
		{"GET", "/dns-query", "", "", 400},
		{"GET", "/dns-query?dns=AAAA", "", "", 400},
		{"POST", "/dns-query", "text/plain", "x", 415},
		{"POST", "/dns-query", "application/dns-message", "short", 400},
		{"PUT", "/dns-query", "", "", 405},
		{"GET", "/elsewhere", "", "", 404},
		{"GET", "/dns-query?name=a..b", "", "", 400},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode, "%s %s", tc.method, tc.path)
	}
	alive()
}

// TestDoQProtocolErrors: RFC 9250 violations close the connection with
// DOQ_PROTOCOL_ERROR (0x2).
func TestDoQProtocolErrors(t *testing.T) {
	ts := start(t, nil)
	q := new(dns.Msg)
	q.SetQuestion("p.example.", dns.TypeA)
	withID, _ := q.Pack() // a random, non-zero ID
	if withID[0] == 0 && withID[1] == 0 {
		withID[1] = 1
	}
	q.Id = 0
	keepalive := q.Copy()
	keepalive.SetEdns0(1232, false)
	keepalive.IsEdns0().Option = append(keepalive.IsEdns0().Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
	ka, _ := keepalive.Pack()
	for name, payload := range map[string][]byte{
		"nonzero-id":          prefix(withID),
		"tcp-keepalive":       prefix(ka),
		"length-beyond-data":  {0, 200, 1, 2, 3},
		"length-below-header": {0, 3, 1, 2, 3},
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := quic.DialAddr(context.Background(), ts.Addr("doq").String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"doq"}}, nil)
			require.NoError(t, err)
			str, err := conn.OpenStream()
			require.NoError(t, err)
			str.Write(payload)
			str.Close()
			requireClosedWith(t, conn, 0x2)
		})
	}
	require.Equal(t, transport.StatusOK, ask(t, ts.url("doq"), ts.pool(), "after.example").Status)
}

func prefix(b []byte) []byte { return append([]byte{byte(len(b) >> 8), byte(len(b))}, b...) }

// TestConnectionLimit: at the limit a new connection closes the one idle
// longest (RFC 7766 §6.2.3); with every connection busy it is refused.
func TestConnectionLimit(t *testing.T) {
	ts := start(t, func(c *server.Config) {
		c.Limits.MaxConns, c.Limits.MaxConnsPerSource = 2, 3
		c.Faults.DelayNames = map[string]time.Duration{"slow.example.": 700 * time.Millisecond}
	})
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ts.Addr("tcp").String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		time.Sleep(50 * time.Millisecond)
		return c
	}
	first, second := dial(), dial()
	third := dial()
	require.True(t, closed(first), "the idlest connection made room")
	require.False(t, closed(second))
	require.False(t, closed(third))

	// Both held connections busy: a fourth is refused.
	q := query("slow.example")
	b, _ := q.Pack()
	second.Write(prefix(b))
	third.Write(prefix(b))
	time.Sleep(100 * time.Millisecond)
	require.True(t, closed(dial()), "refused with every connection busy")
	second.Close()
	third.Close()
	time.Sleep(time.Second) // the delayed answers are done
	require.Equal(t, transport.StatusOK, ask(t, ts.url("tcp"), ts.pool(), "q.example").Status, "room again")
}

// TestTicketKeyFileSurvivesRestart: with tls.ticket_keys (and a fixed
// certificate), a ticket issued before a restart resumes after it, with
// 0-RTT on DoQ.
func TestTicketKeyFileSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cert := testutil.NewCert(t)
	cfg := func(c *server.Config) {
		c.TLS = server.TLS{Cert: cert.CertFile, Key: cert.KeyFile, TicketKeys: filepath.Join(dir, "tickets.key"), TokenKey: filepath.Join(dir, "token.key")}
	}
	ts := start(t, cfg)
	o := ts.pool()
	o.Session = transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true})
	o.ZeroRTT = true
	url := ts.url("doq")
	ask(t, url, o, "r.example")
	port := ts.port("doq")
	ts.Close()
	ts2 := start(t, func(c *server.Config) { cfg(c); c.Listen = server.Listen{DoQ: "127.0.0.1:" + port} })
	rec := ask(t, ts2.url("doq"), o, "r.example")
	require.True(t, rec.Conn.TLSResumed)
	require.True(t, rec.Conn.Used0RTT)
	require.True(t, rec.Conn.TokenUsed)
	require.True(t, ts2.records("query", "doq")[0].TokenUsed, "the token key survived too")
}

// TestDoH11Pipelining sends two GETs back to back on one HTTP/1.1
// connection; the answers come in order, the second after the first's delay.
func TestDoH11Pipelining(t *testing.T) {
	ts := start(t, func(c *server.Config) {
		c.Faults.DelayNames = map[string]time.Duration{"slow.example": 300 * time.Millisecond}
	})
	c, err := tls.Dial("tcp", ts.Addr("doh").String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer c.Close()
	get := func(name string) string {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		q.Id = 0
		b, _ := q.Pack()
		return "GET /dns-query?dns=" + base64.RawURLEncoding.EncodeToString(b) + " HTTP/1.1\r\nHost: dns.test\r\nAccept: application/dns-message\r\n\r\n"
	}
	start := time.Now()
	_, err = c.Write([]byte(get("slow.example.") + get("fast.example.")))
	require.NoError(t, err)
	br := bufio.NewReader(c)
	var names []string
	for range 2 {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		m := new(dns.Msg)
		require.NoError(t, m.Unpack(body))
		names = append(names, m.Question[0].Name)
	}
	require.Equal(t, []string{"slow.example.", "fast.example."}, names)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}

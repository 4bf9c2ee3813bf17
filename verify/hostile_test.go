package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/odoh"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/verify"
)

// dotServer serves TLS on loopback, handing each connection's first
// query (its wire form, nil when none came) to answer, which writes
// what the server sends back.
func dotServer(t *testing.T, answer func(c net.Conn, query []byte)) string {
	return testutil.TLSPeer(t, testutil.NewCert(t), []string{"dot"}, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		q, _ := dnswire.ReadPrefixed(c)
		answer(c, q)
	})
}

// TestVerifyDoTOfMisbehavingServers: a surveyed resolver is hostile, or
// broken. A server that answers with what is no DNS message, with an
// answer to another query, with a query of its own, or with nothing, is
// said not to answer, with the cause; nothing listening is said too. No
// survey waits past its timeout.
func TestVerifyDoTOfMisbehavingServers(t *testing.T) {
	reply := func(c net.Conn, m *dns.Msg) {
		b, err := m.Pack()
		require.NoError(t, err)
		b, _ = dnswire.AppendPrefixed(nil, b)
		c.Write(b)
	}
	answerTo := func(q []byte) *dns.Msg {
		m := new(dns.Msg)
		if err := m.Unpack(q); err != nil {
			return nil
		}
		a := new(dns.Msg).SetReply(m)
		a.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		return a
	}
	o := verify.Options{Timeout: 2 * time.Second}
	for _, c := range []struct {
		name, target string
		want         string // in the error
	}{
		{"a word", dotServer(t, func(c net.Conn, _ []byte) { c.Write([]byte{0, 5, 'h', 'e', 'l', 'l', 'o'}) }), "shorter than a DNS header"},
		{"junk", dotServer(t, func(c net.Conn, _ []byte) { c.Write(append([]byte{0, 16}, bytes.Repeat([]byte{0xff}, 16)...)) }), "malformed"},
		{"another ID", dotServer(t, func(c net.Conn, q []byte) {
			if a := answerTo(q); a != nil {
				a.Id++
				reply(c, a)
			}
		}), "ID"},
		{"another name", dotServer(t, func(c net.Conn, q []byte) {
			if a := answerTo(q); a != nil {
				a.Question[0].Name = "elsewhere.example."
				reply(c, a)
			}
		}), "answer is for elsewhere.example. A, not example.com. A"},
		{"a query back", dotServer(t, func(c net.Conn, q []byte) {
			if m := new(dns.Msg); m.Unpack(q) == nil {
				reply(c, m)
			}
		}), "QR bit not set"},
		{"silence", dotServer(t, func(net.Conn, []byte) {}), "EOF"},
		{"nothing listening", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "refused"},
	} {
		start := time.Now()
		r := verify.VerifyDoT(context.Background(), c.target, o)
		require.False(t, r.Answers, c.name)
		require.Contains(t, r.Error, c.want, c.name)
		require.False(t, r.NoALPN, c.name)
		require.Less(t, time.Since(start), testutil.Scaled(3*o.Timeout), c.name)
	}

	// And one that answers well answers, ALPN or none.
	r := verify.VerifyDoT(context.Background(), dotServer(t, func(c net.Conn, q []byte) {
		if a := answerTo(q); a != nil {
			reply(c, a)
		}
	}), o)
	require.True(t, r.Answers, r.Error)
	require.True(t, r.ALPNDoT)
	require.True(t, r.NoALPN)
	require.Equal(t, "1.3", r.TLS)
}

// TestVerifyDoHOfAWebPage: a candidate whose every path answers a web
// page (200, text/html) has no DoH endpoint and speaks no DoH over any
// HTTP version, though its TLS is surveyed.
func TestVerifyDoHOfAWebPage(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>not here</html>"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r := verify.VerifyDoH(context.Background(), srv.Listener.Addr().String(), verify.Options{Timeout: 2 * time.Second})
	require.Empty(t, r.Endpoints)
	require.False(t, r.HTTP11 || r.HTTP2 || r.HTTP3, "%+v", r)
	require.Contains(t, r.TLSVersions, "1.3")
	require.Nil(t, r.ODoH)
	require.Empty(t, r.CAA)
}

// TestVerifyDoHOfAnODoHTargetAnsweringElse: a target that publishes a
// good config and opens the query sealed to it, but seals back an
// answer to another question, has its config recorded and is said not
// to answer; one that answers the question asked, under another ID,
// answers (its keys derive from the query's, RFC 9230 §6.4).
func TestVerifyDoHOfAnODoHTargetAnsweringElse(t *testing.T) {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	target := func(mutate func(*dns.Msg)) string {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == odoh.ConfigsPath {
				w.Write(odoh.MarshalConfigs(kp.Config))
				return
			}
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
			plain, rcv, err := kp.Open(body)
			q := new(dns.Msg)
			if err != nil || q.Unpack(plain) != nil {
				http.Error(w, "not an ODoH query", http.StatusBadRequest)
				return
			}
			a := new(dns.Msg).SetReply(q)
			mutate(a)
			wire, _ := a.Pack()
			sealed, err := rcv.Seal(wire, 0)
			require.NoError(t, err)
			w.Header().Set("Content-Type", odoh.ContentType)
			w.Write(sealed)
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	o := verify.Options{Timeout: 2 * time.Second}
	r := verify.VerifyDoH(context.Background(), target(func(a *dns.Msg) { a.Question[0].Name = "elsewhere.example." }), o)
	require.NotNil(t, r.ODoH, "its config is read")
	require.Equal(t, uint16(0x0020), r.ODoH.KEM)
	require.False(t, r.ODoHAnswers, "an answer to another question answers nothing")

	r = verify.VerifyDoH(context.Background(), target(func(a *dns.Msg) { a.Id = 0 }), o)
	require.True(t, r.ODoHAnswers)
}

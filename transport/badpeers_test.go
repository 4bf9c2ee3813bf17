package transport_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/transport"
)

// fail runs one exchange that must fail and returns its record. A
// verdict other than a timeout comes without waiting for the timeout,
// so the default is the transport's own, which a handshake makes even
// on a machine whose disk stalls; a case that expects a timeout names a
// short one.
func fail(t *testing.T, url string, opts transport.Options) *transport.Record {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = transport.DefaultTimeout
	}
	tr, err := transport.New(url, opts)
	require.NoError(t, err)
	defer tr.Close()
	start := time.Now()
	rec, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
	require.Error(t, err)
	require.NotNil(t, rec)
	require.Equal(t, rec.Error, err.Error())
	require.Less(t, time.Since(start), opts.Timeout+testutil.Scaled(2*time.Second), "returned long after the timeout")
	require.False(t, rec.Status.HasResponse())
	return rec
}

func TestClosedPortsAreRefused(t *testing.T) {
	port := testutil.FreePort(t)
	for _, scheme := range []string{"udp", "tcp", "tls", "https", "h3", "quic"} {
		t.Run(scheme, func(t *testing.T) {
			rec := fail(t, fmt.Sprintf("%s://127.0.0.1:%d", scheme, port), transport.Options{Insecure: true, Timeout: 3 * time.Second})
			require.Equal(t, transport.StatusRefused, rec.Status, rec.Error)
		})
	}
}

func TestCertificateErrors(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	for _, url := range []string{cd.TLS, cd.HTTPS, cd.H3, cd.QUIC} {
		t.Run(url[:strings.Index(url, ":")]+"/unknown-ca", func(t *testing.T) {
			rec := fail(t, url, transport.Options{})
			require.Equal(t, transport.StatusCert, rec.Status, rec.Error)
			// The record keeps what the failed handshake showed.
			require.NotEmpty(t, rec.Conn.RemoteAddr, "addresses")
			require.NotEmpty(t, rec.Conn.LocalAddr)
			require.Positive(t, rec.Bytes.Sent, "the ClientHello")
			require.Greater(t, rec.Bytes.Received, int64(300), "the server's certificate")
			require.Positive(t, rec.Packets.Received)
			b, err := json.Marshal(rec)
			require.NoError(t, err)
			// Over TCP the version is chosen before the certificate is
			// refused; quic-go gives none for a failed handshake.
			require.Contains(t, []string{"1.3", ""}, rec.Conn.TLSVersion)
			require.NotContains(t, string(b), "0x0000", "no version is named when none was chosen")
			require.Contains(t, string(b), `"delayed_ack_stall":false`, "present even when false")
		})
		t.Run(url[:strings.Index(url, ":")]+"/wrong-name", func(t *testing.T) {
			rec := fail(t, url, transport.Options{RootCAs: cd.Cert.Pool, SNI: "wrong.example"})
			require.Equal(t, transport.StatusCert, rec.Status, rec.Error)
		})
	}
	// --insecure accepts what the CA check refused.
	rec := exchange(t, cd.TLS, transport.Options{Insecure: true, SNI: "wrong.example"}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, transport.StatusOK, rec.Status)
}

func TestWrongProtocolAndHTTPErrors(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	rec := fail(t, "tls://"+cd.Do53, transport.Options{Insecure: true, Timeout: 700 * time.Millisecond})
	require.Contains(t, []transport.Status{transport.StatusTLS, transport.StatusTimeout}, rec.Status, rec.Error)
	require.Empty(t, rec.Conn.TLSVersion, "no handshake chose a version: none is named (not 0x0000)")
	rec = fail(t, "quic://"+cd.Do53, transport.Options{Insecure: true, Timeout: 700 * time.Millisecond})
	require.Equal(t, transport.StatusTimeout, rec.Status, rec.Error)
	for _, v := range []string{"1.1", "2", "3"} {
		rec = fail(t, "https://"+cd.DoH+"/not-dns", transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: v})
		require.Equal(t, transport.StatusHTTP, rec.Status, rec.Error)
		require.Equal(t, http.StatusNotFound, rec.Conn.HTTPStatus)
	}
	for _, v := range []string{"1.1", "2", "3"} {
		for _, reuse := range []bool{false, true} {
			rec = exchange(t, "https://"+cd.DoH+"/dns-query", transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: v, Reuse: reuse}, query(testutil.ZoneName, dns.TypeA))
			require.Equal(t, http.StatusOK, rec.Conn.HTTPStatus, "HTTP/%s, reuse %v", v, reuse)
		}
	}
}

// udpFixture answers every query with what reply makes of it.
func udpFixture(t *testing.T, reply func(q []byte) []byte) string {
	return "udp://" + testutil.UDPPeer(t, reply)
}

// tcpFixture runs serve on every accepted connection.
func tcpFixture(t *testing.T, serve func(c net.Conn)) string {
	return "tcp://" + testutil.TCPPeer(t, serve)
}

func answer(q []byte, mutate func(*dns.Msg)) []byte {
	m := new(dns.Msg)
	if err := m.Unpack(q); err != nil {
		return nil
	}
	r := new(dns.Msg)
	r.SetReply(m)
	rr, _ := dns.NewRR(m.Question[0].Name + " 60 IN A " + testutil.ZoneA)
	r.Answer = append(r.Answer, rr)
	if mutate != nil {
		mutate(r)
	}
	out, _ := r.Pack()
	return out
}

func TestMisbehavingUDPServers(t *testing.T) {
	cases := []struct {
		name  string
		reply func([]byte) []byte
		want  transport.Status
	}{
		{"silent", func([]byte) []byte { return nil }, transport.StatusTimeout},
		{"short-garbage-ignored", func([]byte) []byte { return []byte{1, 2, 3} }, transport.StatusTimeout},
		{"wrong-id-ignored", func(q []byte) []byte { return answer(q, func(m *dns.Msg) { m.Id++ }) }, transport.StatusTimeout},
		{"garbage-with-our-id", func(q []byte) []byte {
			return append(q[:2:2], []byte("\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00garbage")...)
		}, transport.StatusMalformed},
		{"other-question", func(q []byte) []byte {
			return answer(q, func(m *dns.Msg) { m.Question[0].Name = "other.test." })
		}, transport.StatusMalformed},
		{"not-a-response", func(q []byte) []byte { return answer(q, func(m *dns.Msg) { m.Response = false }) }, transport.StatusMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := fail(t, udpFixture(t, c.reply), transport.Options{Timeout: 300 * time.Millisecond})
			require.Equal(t, c.want, rec.Status, rec.Error)
		})
	}
	t.Run("truncated", func(t *testing.T) {
		url := udpFixture(t, func(q []byte) []byte { return answer(q, func(m *dns.Msg) { m.Truncated = true; m.Answer = nil }) })
		rec := exchange(t, url, transport.Options{}, query(testutil.ZoneName, dns.TypeA))
		require.Equal(t, transport.StatusTruncated, rec.Status)
	})
	// What an answer's question must be: the query's type and class, its
	// name in any case (resolvers that randomize the case of names, DNS
	// 0x20, echo the query's); an error answer may leave it out (RFC 1035
	// allows it, and servers do), an answer that claims success may not.
	for _, c := range []struct {
		name   string
		change func(*dns.Msg)
		want   transport.Status
		rcode  string
	}{
		{"name-in-another-case", func(m *dns.Msg) { m.Question[0].Name = strings.ToUpper(m.Question[0].Name) }, transport.StatusOK, "NOERROR"},
		{"other-type", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA }, transport.StatusMalformed, ""},
		{"other-class", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }, transport.StatusMalformed, ""},
		{"refused-without-question", func(m *dns.Msg) { m.Question, m.Answer, m.Rcode = nil, nil, dns.RcodeRefused }, transport.StatusRcode, "REFUSED"},
		{"success-without-question", func(m *dns.Msg) { m.Question = nil }, transport.StatusMalformed, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := udpFixture(t, func(q []byte) []byte { return answer(q, c.change) })
			if c.want == transport.StatusMalformed {
				rec := fail(t, url, transport.Options{})
				require.Equal(t, c.want, rec.Status, rec.Error)
				return
			}
			rec := exchange(t, url, transport.Options{Timeout: 700 * time.Millisecond}, query(testutil.ZoneName, dns.TypeA))
			require.Equal(t, c.want, rec.Status, rec.Error)
			require.Equal(t, c.rcode, rec.Rcode)
		})
	}
}

func TestMisbehavingTCPServers(t *testing.T) {
	readQuery := func(c net.Conn) []byte {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return nil
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		io.ReadFull(c, q)
		return q
	}
	cases := []struct {
		name  string
		serve func(net.Conn)
		want  transport.Status
	}{
		{"close-at-once", func(c net.Conn) {}, transport.StatusClosed},
		{"close-after-query", func(c net.Conn) { readQuery(c) }, transport.StatusClosed},
		{"length-too-short", func(c net.Conn) { readQuery(c); c.Write([]byte{0, 3, 1, 2, 3}) }, transport.StatusMalformed},
		{"message-cut-short", func(c net.Conn) {
			q := readQuery(c)
			a := answer(q, nil)
			c.Write(append([]byte{byte(len(a) >> 8), byte(len(a))}, a[:len(a)/2]...))
		}, transport.StatusMalformed},
		{"prefix-cut-short", func(c net.Conn) { readQuery(c); c.Write([]byte{0}) }, transport.StatusMalformed},
		{"garbage", func(c net.Conn) {
			q := readQuery(c)
			c.Write(append([]byte{0, 14}, append(q[:2:2], "\x81\x80garbage!!!!"...)...))
		}, transport.StatusMalformed},
		{"silent", func(c net.Conn) { readQuery(c); time.Sleep(2 * time.Second) }, transport.StatusTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := fail(t, tcpFixture(t, c.serve), transport.Options{Timeout: 500 * time.Millisecond})
			require.Equal(t, c.want, rec.Status, rec.Error)
		})
	}
	t.Run("a-late-answer-is-not-the-next-querys", func(t *testing.T) {
		// The answer to a query that timed out comes just after the next
		// query, which has the same ID and question, was sent: it must not
		// pass for that query's own, which comes 150 ms later.
		url := tcpFixture(t, func(c net.Conn) {
			q1, q2 := readQuery(c), readQuery(c)
			for i, q := range [][]byte{q1, q2} {
				if i == 1 {
					time.Sleep(150 * time.Millisecond)
				}
				a := answer(q, func(r *dns.Msg) { r.Answer[0].(*dns.A).A = net.IPv4(192, 0, 2, byte(1+i)) })
				c.Write(append([]byte{byte(len(a) >> 8), byte(len(a))}, a...))
			}
			time.Sleep(time.Second)
		})
		tr, err := transport.New(url, transport.Options{Reuse: true, Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		defer tr.Close()
		q := query("a.test.", dns.TypeA)
		q.Id = 7
		rec, err := tr.Exchange(context.Background(), q)
		require.Error(t, err)
		require.Equal(t, transport.StatusTimeout, rec.Status, rec.Error)
		q = query("a.test.", dns.TypeA)
		q.Id = 7
		rec, err = tr.Exchange(context.Background(), q)
		require.NoError(t, err)
		require.Equal(t, transport.StatusOK, rec.Status, rec.Error)
		require.True(t, rec.Conn.Reused, "the same connection")
		require.Contains(t, rec.Answers[0], "192.0.2.2", "its own answer, not the late one")
		require.GreaterOrEqual(t, rec.Timing.TotalMs, 140.0)
		require.Equal(t, uint16(7), rec.Response.Id, "the caller's ID given back")
	})
	t.Run("answers-out-of-order", func(t *testing.T) {
		// Two pipelined queries answered in reverse order must each get their own answer.
		url := tcpFixture(t, func(c net.Conn) {
			q1, q2 := readQuery(c), readQuery(c)
			for _, q := range [][]byte{q2, q1} {
				a := answer(q, nil)
				c.Write(append([]byte{byte(len(a) >> 8), byte(len(a))}, a...))
			}
			time.Sleep(time.Second)
		})
		tr, err := transport.New(url, transport.Options{Reuse: true})
		require.NoError(t, err)
		defer tr.Close()
		done := make(chan *transport.Record, 2)
		for _, name := range []string{"a.test.", "b.test."} {
			go func() { rec, _ := tr.Exchange(context.Background(), query(name, dns.TypeA)); done <- rec }()
			time.Sleep(20 * time.Millisecond) // a then b on the wire
		}
		for range 2 {
			rec := <-done
			require.Equal(t, transport.StatusOK, rec.Status, rec.Error)
			require.Contains(t, rec.Answers[0], rec.QName)
		}
	})
}

// tlsFixture serves HTTPS (HTTP/1.1 and HTTP/2) with handler.
func tlsFixture(t *testing.T, cert *testutil.Cert, handler http.HandlerFunc) string {
	kp, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
	require.NoError(t, err)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{kp}, NextProtos: []string{"h2", "http/1.1"}})
	require.NoError(t, err)
	srv := &http.Server{Handler: handler, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "https://" + l.Addr().String() + "/dns-query"
}

func TestMisbehavingDoHServers(t *testing.T) {
	cert := testutil.NewCert(t)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    transport.Status
	}{
		{"wrong-content-type", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>hello</html>"))
		}, transport.StatusMalformed},
		{"oversized", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/dns-message")
			w.Write(make([]byte, 70000))
		}, transport.StatusMalformed},
		{"garbage", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/dns-message")
			w.Write([]byte("\x00\x00\x81\x80garbage-garbage"))
		}, transport.StatusMalformed},
		{"server-error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "resolver on fire", http.StatusInternalServerError)
		}, transport.StatusHTTP},
	}
	for _, c := range cases {
		for _, v := range []string{"1.1", "2"} {
			t.Run(c.name+"/"+v, func(t *testing.T) {
				rec := fail(t, tlsFixture(t, cert, c.handler), transport.Options{RootCAs: cert.Pool, HTTPVersion: v})
				require.Equal(t, c.want, rec.Status, rec.Error)
				require.NotEmpty(t, rec.Conn.RemoteAddr, "an error keeps the connection's facts")
				require.Positive(t, rec.Bytes.Received)
			})
		}
	}
	// A handler that aborts resets the stream on HTTP/2 (RST_STREAM) and
	// closes the connection on HTTP/1.1.
	abort := tlsFixture(t, cert, func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	rec := fail(t, abort, transport.Options{RootCAs: cert.Pool, HTTPVersion: "2"})
	require.Equal(t, transport.StatusReset, rec.Status, rec.Error)
	require.Equal(t, "h2", rec.Conn.ALPN)
	require.NotEmpty(t, rec.Conn.RemoteAddr)
	require.Positive(t, rec.Bytes.Sent)
	require.Positive(t, rec.Packets.Received)
	rec = fail(t, abort, transport.Options{RootCAs: cert.Pool, HTTPVersion: "1.1"})
	require.Equal(t, transport.StatusClosed, rec.Status, rec.Error)
}

// TestDoHJSONAndWireFormat checks the requests doxlab sends: RFC 8484 GET
// with base64url and no padding, POST with the message as body, ID 0, and
// the JSON API. The fixture answers each form the way a resolver does.
func TestDoHJSONAndWireFormat(t *testing.T) {
	cert := testutil.NewCert(t)
	url := tlsFixture(t, cert, func(w http.ResponseWriter, r *http.Request) {
		var wire []byte
		switch {
		case r.URL.Query().Get("name") != "":
			if r.Header.Get("Accept") != "application/dns-json" {
				http.Error(w, "bad accept", 400)
				return
			}
			w.Header().Set("Content-Type", "application/dns-json")
			fmt.Fprintf(w, `{"Status":0,"TC":false,"RD":true,"RA":true,"AD":false,"CD":false,"Question":[{"name":%q,"type":1}],"Answer":[{"name":%q,"type":1,"TTL":60,"data":"%s"},{"name":%q,"type":16,"TTL":60,"data":"\"hello world\""}]}`,
				r.URL.Query().Get("name"), r.URL.Query().Get("name"), testutil.ZoneA, r.URL.Query().Get("name"))
			return
		case r.Method == http.MethodPost:
			if r.Header.Get("Content-Type") != "application/dns-message" {
				http.Error(w, "bad content type", http.StatusUnsupportedMediaType)
				return
			}
			wire, _ = io.ReadAll(r.Body)
		default:
			s := r.URL.Query().Get("dns")
			if strings.ContainsAny(s, "=+/") {
				http.Error(w, "not base64url without padding", 400)
				return
			}
			wire, _ = decodeB64(s)
		}
		if len(wire) < 2 || wire[0] != 0 || wire[1] != 0 {
			http.Error(w, "ID not 0", 400)
			return
		}
		w.Header().Set("Content-Type", "application/dns-message")
		w.Write(answer(wire, nil))
	})
	for _, c := range []struct {
		name   string
		method string
		json   bool
	}{{"get", "get", false}, {"post", "post", false}, {"json", "get", true}} {
		t.Run(c.name, func(t *testing.T) {
			q := query(testutil.ZoneName, dns.TypeA)
			q.Id = 4242
			rec := exchange(t, url, transport.Options{RootCAs: cert.Pool, Method: c.method, JSON: c.json}, q)
			require.Equal(t, transport.StatusOK, rec.Status)
			require.Equal(t, uint16(4242), rec.Response.Id, "ID restored locally")
			require.Contains(t, rec.Answers[0], testutil.ZoneA)
			if c.json {
				require.Len(t, rec.Answers, 2)
				require.Contains(t, rec.Answers[1], `"hello world"`)
			}
		})
	}
}

// doqFixture is a DoQ server on quic-go that hands each stream to serve;
// it accepts only QUIC v1, so a client offering v2 first must negotiate.
func doqFixture(t *testing.T, cert *testutil.Cert, serve func(str *quic.Stream), alpn ...string) string {
	if len(alpn) == 0 {
		alpn = []string{"doq"}
	}
	return "quic://" + testutil.QUICPeer(t, cert, alpn, serve)
}

func TestDoQFramingAndVersionNegotiation(t *testing.T) {
	cert := testutil.NewCert(t)
	readQuery := func(str *quic.Stream) []byte {
		b, _ := io.ReadAll(str) // the client sends FIN after its query
		if len(b) < 2 || int(binary.BigEndian.Uint16(b)) != len(b)-2 {
			str.CancelWrite(0x2) // DOQ_PROTOCOL_ERROR
			return nil
		}
		return b[2:]
	}
	good := doqFixture(t, cert, func(str *quic.Stream) {
		q := readQuery(str)
		if q == nil || q[0] != 0 || q[1] != 0 { // RFC 9250 §4.2.1
			str.CancelWrite(0x2)
			return
		}
		a := answer(q, nil)
		str.Write(append([]byte{byte(len(a) >> 8), byte(len(a))}, a...))
		str.Close()
	})
	q := query(testutil.ZoneName, dns.TypeA)
	q.Id = 999
	rec := exchange(t, good, transport.Options{RootCAs: cert.Pool, QUICVersions: []quic.Version{quic.Version2, quic.Version1}}, q)
	require.Equal(t, transport.StatusOK, rec.Status)
	require.Equal(t, uint16(999), rec.Response.Id)
	require.True(t, rec.Conn.VersionNeg, "v2 offered to a v1-only server")
	require.Equal(t, "v1", rec.Conn.QUICVersion)

	// Offered only v2, the v1-only server's Version Negotiation ends the
	// handshake; the record says so, with what was sent and received.
	rec = fail(t, good, transport.Options{RootCAs: cert.Pool, QUICVersions: []quic.Version{quic.Version2}})
	require.Equal(t, transport.StatusQUIC, rec.Status, rec.Error)
	require.True(t, rec.Conn.VersionNeg)
	require.NotEmpty(t, rec.Conn.RemoteAddr)
	require.Positive(t, rec.Packets.Sent)
	// A Version Negotiation answers each Initial datagram, but the client
	// gives up at the first it reads, so the second may stay unread.
	require.Positive(t, rec.Packets.Received, "the Version Negotiation")
	require.LessOrEqual(t, rec.Packets.Received, rec.Packets.Sent)
	require.GreaterOrEqual(t, rec.Bytes.Sent, int64(1200))

	// A session pins the version learned: the next connection offers v1
	// first and needs no Version Negotiation.
	sess := transport.NewSession(transport.SessionConfig{Versions: true})
	o := transport.Options{RootCAs: cert.Pool, QUICVersions: []quic.Version{quic.Version2, quic.Version1}, Session: sess}
	require.True(t, exchange(t, good, o, query(testutil.ZoneName, dns.TypeA)).Conn.VersionNeg)
	require.False(t, exchange(t, good, o, query(testutil.ZoneName, dns.TypeA)).Conn.VersionNeg, "pinned")

	cases := []struct {
		name  string
		serve func(*quic.Stream)
		want  transport.Status
	}{
		{"cut-short", func(str *quic.Stream) {
			a := answer(readQuery(str), nil)
			str.Write(append([]byte{byte(len(a) >> 8), byte(len(a))}, a[:10]...))
			str.Close()
		}, transport.StatusMalformed},
		{"length-too-short", func(str *quic.Stream) { readQuery(str); str.Write([]byte{0, 2, 0, 0}); str.Close() }, transport.StatusMalformed},
		{"fin-without-answer", func(str *quic.Stream) { readQuery(str); str.Close() }, transport.StatusMalformed},
		{"stream-reset", func(str *quic.Stream) { readQuery(str); str.CancelWrite(0x2) }, transport.StatusReset},
		{"no-answer", func(str *quic.Stream) { readQuery(str) }, transport.StatusTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := fail(t, doqFixture(t, cert, c.serve), transport.Options{RootCAs: cert.Pool, Timeout: 500 * time.Millisecond})
			require.Equal(t, c.want, rec.Status, rec.Error)
		})
	}
}

func decodeB64(s string) ([]byte, error) { return base64RawURL.DecodeString(s) }

var base64RawURL = base64.RawURLEncoding

// TestDoQDraftWithoutPrefix talks to a server that speaks only draft -02,
// whose messages have no length prefix and end with the stream.
func TestDoQDraftWithoutPrefix(t *testing.T) {
	cert := testutil.NewCert(t)
	url := doqFixture(t, cert, func(str *quic.Stream) {
		q, _ := io.ReadAll(str)
		str.Write(answer(q, nil))
		str.Close()
	}, "doq-i02")
	rec := fail(t, url, transport.Options{RootCAs: cert.Pool})
	require.Equal(t, transport.StatusTLS, rec.Status, "only doq offered: no common ALPN; %s", rec.Error)
	rec = exchange(t, url, transport.Options{RootCAs: cert.Pool, DoQALPNs: append([]string{"doq"}, transport.DraftDoQALPNs...)}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, transport.StatusOK, rec.Status)
	require.Equal(t, "doq-i02", rec.Conn.ALPN)
}

func TestIPv6AndNames(t *testing.T) {
	pc, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(answer(buf[:n], nil), addr)
		}
	}()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	rec := exchange(t, fmt.Sprintf("udp://[::1]:%d", port), transport.Options{}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, transport.StatusOK, rec.Status)
	require.True(t, strings.HasPrefix(rec.Conn.RemoteAddr, "[::1]:"), rec.Conn.RemoteAddr)

	// A name resolves once, outside the timed exchange, preferring IPv4.
	cd := testutil.StartCoreDNS(t)
	rec = exchange(t, "tls://localhost:"+strings.Split(cd.DoT, ":")[1], transport.Options{RootCAs: cd.Cert.Pool}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, transport.StatusOK, rec.Status)
	require.True(t, strings.HasPrefix(rec.Conn.RemoteAddr, "127.0.0.1:"), rec.Conn.RemoteAddr)
}

// TestDelayedACKStallIsLabelled: a server with Nagle's algorithm on that
// writes its answer's length and message apart (as hickory-dns 0.26's TCP
// listener does) has the kernel hold the message until the client's
// delayed ACK of the length; the record says so. Written at once, the
// same answer is not labelled.
func TestDelayedACKStallIsLabelled(t *testing.T) {
	serve := func(split bool) func(net.Conn) {
		return func(c net.Conn) {
			c.(*net.TCPConn).SetNoDelay(false)
			for {
				q, err := dnswire.ReadPrefixed(c)
				if err != nil {
					return
				}
				a := answer(q, nil)
				if split {
					c.Write([]byte{byte(len(a) >> 8), byte(len(a))})
					c.Write(a)
				} else {
					c.Write(append([]byte{byte(len(a) >> 8), byte(len(a))}, a...))
				}
			}
		}
	}
	run := func(url string) (stalls int, spread float64) {
		tr, err := transport.New(url, transport.Options{Reuse: true, Timeout: 2 * time.Second})
		require.NoError(t, err)
		defer tr.Close()
		for range 5 {
			rec, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
			require.NoError(t, err)
			if rec.Conn.DelayedACKStall {
				stalls++
				require.GreaterOrEqual(t, rec.Timing.QueryMs, rec.Timing.AnswerSpreadMs, "the stall is part of the query time")
			}
			spread = max(spread, rec.Timing.AnswerSpreadMs)
		}
		return stalls, spread
	}
	stalls, spread := run(tcpFixture(t, serve(true)))
	require.GreaterOrEqual(t, stalls, 3, "the kernel's quick ACKs may spare the first answers, not the later ones")
	require.GreaterOrEqual(t, spread, 30.0)
	stalls, spread = run(tcpFixture(t, serve(false)))
	require.Zero(t, stalls, "an answer written at once never stalls")
	require.Less(t, spread, 30.0)
}

// TestPeerTextIsPrintable: a server that closes the QUIC connection
// with a reason phrase of escape sequences (which would clear a
// terminal and retitle its window) has them recorded as escapes, in the
// record's error and the error returned; the error is still its kind.
func TestPeerTextIsPrintable(t *testing.T) {
	cert := testutil.NewCert(t)
	addr := testutil.QUICConnPeer(t, cert, []string{"doq"}, func(c *quic.Conn) { c.CloseWithError(0x2, "\x1b]0;owned\x07\x1b[2J") })
	rec := fail(t, "quic://"+addr, transport.Options{RootCAs: cert.Pool})
	require.Contains(t, rec.Error, `\x1b]0;owned\x07\x1b[2J`)
	require.False(t, strings.ContainsFunc(rec.Error, unicode.IsControl), "%q", rec.Error)
	require.Equal(t, transport.StatusQUIC, rec.Status, "still a QUIC error: %s", rec.Error)
}

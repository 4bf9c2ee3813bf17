package transport_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/transport"
)

func query(name string, t uint16) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, t)
	return q
}

func exchange(t *testing.T, url string, opts transport.Options, q *dns.Msg) *transport.Record {
	t.Helper()
	tr, err := transport.New(url, opts)
	require.NoError(t, err)
	defer tr.Close()
	rec, err := tr.Exchange(context.Background(), q)
	require.NotNil(t, rec)
	require.NoError(t, err, "status %s", rec.Status)
	return rec
}

// requireTimingOrder checks that the phases of a new connection come in
// order and fit inside the total.
func requireTimingOrder(t *testing.T, rec *transport.Record, zeroRTT bool) {
	t.Helper()
	tm := rec.Timing
	require.Greater(t, tm.TotalMs, 0.0)
	require.Greater(t, tm.QueryMs, 0.0)
	require.LessOrEqual(t, tm.QueryStartMs+tm.QueryMs, tm.TotalMs+0.002) // each rounded to the µs on its own
	setup := tm.SocketMs + tm.ConnectMs + tm.HandshakeMs
	if !zeroRTT {
		// Without 0-RTT the query leaves only after the handshake.
		// 50 µs of slack: after a rejected 0-RTT the resend and the
		// handshake timestamp wake on the same event in two goroutines.
		require.GreaterOrEqual(t, tm.QueryStartMs+0.05, setup, "query started before the handshake ended: %+v", tm)
	} else {
		require.Less(t, tm.QueryStartMs, setup, "0-RTT query did not overlap the handshake: %+v", tm)
	}
}

func TestCoreDNSAllTransports(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	cases := []struct {
		name, url, http string
		proto, alpn     string
		tls, quic, tcp  bool
	}{
		{"udp", cd.UDP, "", transport.ProtoUDP, "", false, false, false},
		{"tcp", cd.TCP, "", transport.ProtoTCP, "", false, false, true},
		{"dot", cd.TLS, "", transport.ProtoDoT, "", true, false, true},
		{"doh1", cd.HTTPS, "1.1", transport.ProtoDoH1, "http/1.1", true, false, true},
		{"doh2", cd.HTTPS, "2", transport.ProtoDoH2, "h2", true, false, true},
		{"doh3-https", cd.HTTPS, "3", transport.ProtoDoH3, "h3", true, true, false},
		{"doh3", cd.H3, "", transport.ProtoDoH3, "h3", true, true, false},
		{"doq", cd.QUIC, "", transport.ProtoDoQ, "doq", true, true, false},
	}
	for _, c := range cases {
		for _, method := range []string{"get", "post"} {
			if method == "post" && !strings.HasPrefix(c.proto, "doh") {
				continue
			}
			t.Run(c.name+"/"+method, func(t *testing.T) {
				rec := exchange(t, c.url, transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: c.http, Method: method}, query(testutil.ZoneName, dns.TypeA))
				require.Equal(t, transport.StatusOK, rec.Status)
				require.Equal(t, "NOERROR", rec.Rcode)
				require.Len(t, rec.Answers, 1)
				require.Contains(t, rec.Answers[0], testutil.ZoneA)
				require.Equal(t, c.proto, rec.Protocol)
				require.False(t, rec.Conn.Reused)
				require.Equal(t, c.alpn, rec.Conn.ALPN)
				requireTimingOrder(t, rec, false)
				if c.tcp {
					require.Greater(t, rec.Timing.ConnectMs, 0.0)
				}
				if c.tls {
					require.Equal(t, "1.3", rec.Conn.TLSVersion)
					require.Greater(t, rec.Timing.HandshakeMs, 0.0)
					require.False(t, rec.Conn.TLSResumed)
					// A new TLS connection carries a certificate: far more than the DNS message.
					require.Greater(t, rec.Bytes.Received, rec.DNSBytes.Received+300)
				}
				if c.quic {
					require.Equal(t, "v1", rec.Conn.QUICVersion)
					require.False(t, rec.Conn.Retry)
					require.False(t, rec.Conn.Attempted0RTT)
				}
				require.GreaterOrEqual(t, rec.Bytes.Sent, rec.DNSBytes.Sent)
				require.Greater(t, rec.Packets.Sent, int64(0))
				require.Greater(t, rec.Packets.Received, int64(0))
				require.NotEmpty(t, rec.Conn.LocalAddr)
				require.Equal(t, "127.0.0.1", strings.Split(rec.Conn.RemoteAddr, ":")[0])
			})
		}
	}
}

func TestNXDomainIsAnAnswer(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	for _, url := range []string{cd.UDP, cd.TLS, cd.QUIC} {
		rec := exchange(t, url, transport.Options{RootCAs: cd.Cert.Pool}, query(testutil.NXName, dns.TypeA))
		require.Equal(t, transport.StatusNXDomain, rec.Status, url)
		require.Equal(t, "NXDOMAIN", rec.Rcode)
	}
}

// TestResumptionAndZeroRTT checks the papers' three conditions: a fresh
// connection, a resumed one, and 0-RTT where the transport allows it.
func TestResumptionAndZeroRTT(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	// 0-RTT goes through a relay that holds replies for 20 ms: early data
	// must leave before the handshake ends, and on loopback a busy
	// machine may not schedule the query within the 1 ms a bare
	// handshake takes.
	const hold = 20 * time.Millisecond
	cases := []struct {
		name, url, http string
		zeroRTT         bool
	}{
		{"dot", cd.TLS, "", false},
		{"doh2", cd.HTTPS, "2", false},
		{"doh1", cd.HTTPS, "1.1", false},
		{"doh3", "h3://" + testutil.DelayUDP(t, cd.DoH, hold) + "/dns-query", "", true},
		{"doq", "quic://" + testutil.DelayUDP(t, cd.DoQ, hold), "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sess := transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true, Versions: true})
			opts := transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: c.http, Session: sess, ZeroRTT: c.zeroRTT}
			tr, err := transport.New(c.url, opts)
			require.NoError(t, err)
			defer tr.Close()
			first, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
			require.NoError(t, err)
			require.False(t, first.Conn.TLSResumed)
			require.False(t, first.Conn.Used0RTT)
			second, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
			require.NoError(t, err)
			require.False(t, second.Conn.Reused, "a fresh connection per query")
			require.True(t, second.Conn.TLSResumed, "second connection did not resume")
			if c.zeroRTT {
				require.True(t, second.Conn.Attempted0RTT)
				require.True(t, second.Conn.Used0RTT, "CoreDNS (quic-go) accepts 0-RTT")
				require.False(t, second.Conn.Rejected0RTT)
				require.True(t, second.Conn.TokenUsed, "quic-go sends NEW_TOKEN; the second Initial carries it")
				requireTimingOrder(t, second, true)
			}
		})
	}
}

// TestFreshConnectionsDialInParallel: without Reuse, concurrent
// exchanges each open their own connection at once, rather than queueing
// behind one another's handshakes (a stub forwarding a page's lookups).
// Through a relay holding replies 200 ms, queued handshakes would take
// 200 ms more each.
func TestFreshConnectionsDialInParallel(t *testing.T) {
	testutil.Timed(t)
	cd := testutil.StartCoreDNS(t)
	const hold = 200 * time.Millisecond
	for _, c := range []struct{ name, url string }{
		{"doq", "quic://" + testutil.DelayUDP(t, cd.DoQ, hold)},
		{"doh3", "h3://" + testutil.DelayUDP(t, cd.DoH, hold) + "/dns-query"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := transport.New(c.url, transport.Options{RootCAs: cd.Cert.Pool})
			require.NoError(t, err)
			defer tr.Close()
			var wg sync.WaitGroup
			totals := make([]float64, 4)
			for i := range totals {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
					if assert.NoError(t, err) {
						totals[i] = rec.Timing.TotalMs
					}
				}()
			}
			wg.Wait()
			slices.Sort(totals)
			require.Less(t, totals[3]-totals[0], float64(hold/time.Millisecond)*0.75, "exchanges waited for one another: %v ms", totals)
		})
	}
}

func TestReuseKeepsOneConnection(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	for _, c := range []struct{ name, url, http string }{
		{"udp", cd.UDP, ""}, {"tcp", cd.TCP, ""}, {"dot", cd.TLS, ""}, {"doh1", cd.HTTPS, "1.1"},
		{"doh2", cd.HTTPS, "2"}, {"doh3", cd.H3, ""}, {"doq", cd.QUIC, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := transport.New(c.url, transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: c.http, Reuse: true})
			require.NoError(t, err)
			defer tr.Close()
			var local string
			var firstBytes int64
			for i := range 3 {
				rec, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
				require.NoError(t, err)
				require.Equal(t, i > 0, rec.Conn.Reused, "exchange %d", i)
				if i == 0 {
					local, firstBytes = rec.Conn.LocalAddr, rec.Bytes.Received
					continue
				}
				require.Equal(t, local, rec.Conn.LocalAddr, "same socket")
				require.Zero(t, rec.Timing.HandshakeMs)
				require.Zero(t, rec.Timing.ConnectMs)
				// A reused exchange pays no handshake. (Its window may still hold
				// late connection traffic: a session ticket, NEW_TOKEN.)
				if c.name != "udp" && c.name != "tcp" {
					require.Less(t, rec.Bytes.Received, firstBytes, "exchange %d", i)
				}
			}
		})
	}
}

// TestConcurrentOnOneConnection pipelines (TCP, DoT, DoH/1.1) and multiplexes (DoH/2,
// DoH/3, DoQ) many queries on one connection; every answer must reach the
// query that asked for it.
func TestConcurrentOnOneConnection(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	for _, c := range []struct{ name, url, http string }{
		{"udp", cd.UDP, ""}, {"tcp", cd.TCP, ""}, {"dot", cd.TLS, ""}, {"doh1", cd.HTTPS, "1.1"}, {"doh2", cd.HTTPS, "2"}, {"doh3", cd.H3, ""}, {"doq", cd.QUIC, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := transport.New(c.url, transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: c.http, Reuse: true})
			require.NoError(t, err)
			defer tr.Close()
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name, want := testutil.ZoneName, transport.StatusOK
					if i%2 == 1 {
						name, want = testutil.NXName, transport.StatusNXDomain
					}
					q := query(name, dns.TypeA)
					q.Id = 7 // the same ID everywhere: the transport must keep them apart
					rec, err := tr.Exchange(context.Background(), q)
					if err == nil && rec.Status != want {
						err = &mismatch{rec.QName, string(rec.Status)}
					}
					if err == nil && rec.Response.Id != 7 {
						err = &mismatch{"id", "changed"}
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		})
	}
}

type mismatch struct{ a, b string }

func (m *mismatch) Error() string { return m.a + ": " + m.b }

func TestPaddingAndVersions(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	rec := exchange(t, cd.TLS, transport.Options{RootCAs: cd.Cert.Pool, Padding: true}, query(testutil.ZoneName, dns.TypeA))
	require.Zero(t, rec.DNSBytes.Sent%128, "padded query is %d octets", rec.DNSBytes.Sent)

	rec = exchange(t, cd.QUIC, transport.Options{RootCAs: cd.Cert.Pool, QUICVersions: []quic.Version{quic.Version2}}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, "v2", rec.Conn.QUICVersion)
	require.False(t, rec.Conn.VersionNeg)
}

func TestLocalPortQlogAndKeyLog(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	port := testutil.FreePort(t)
	dir := t.TempDir()
	var keys bytes.Buffer
	rec := exchange(t, cd.QUIC, transport.Options{RootCAs: cd.Cert.Pool, LocalAddr: "127.0.0.1:" + strconv.Itoa(port), QlogDir: dir, KeyLog: &keys}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(port), rec.Conn.LocalAddr)
	require.Contains(t, keys.String(), "CLIENT_HANDSHAKE_TRAFFIC_SECRET")
	require.Eventually(t, func() bool {
		files, _ := os.ReadDir(dir)
		if len(files) != 1 {
			return false
		}
		b, _ := os.ReadFile(dir + "/" + files[0].Name())
		return bytes.Contains(b, []byte("transport:packet_received"))
	}, 5*time.Second, 50*time.Millisecond, "one qlog file with received packets")

	rec = exchange(t, cd.TCP, transport.Options{LocalAddr: "127.0.0.1:" + strconv.Itoa(port)}, query(testutil.ZoneName, dns.TypeA))
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(port), rec.Conn.LocalAddr)
}

func TestUnbound(t *testing.T) {
	ub := testutil.StartUnbound(t)
	for _, c := range []struct{ name, url string }{{"udp", ub.UDP}, {"dot", ub.TLS}, {"doh2", ub.HTTPS}} {
		t.Run(c.name, func(t *testing.T) {
			sess := transport.NewSession(transport.SessionConfig{Tickets: true})
			opts := transport.Options{RootCAs: ub.Cert.Pool, Session: sess}
			tr, err := transport.New(c.url, opts)
			require.NoError(t, err)
			defer tr.Close()
			for i := range 2 {
				rec, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
				require.NoError(t, err)
				require.Equal(t, transport.StatusOK, rec.Status)
				require.Contains(t, rec.Answers[0], testutil.ZoneA)
				if c.name != "udp" {
					requireTimingOrder(t, rec, false)
					require.Equal(t, i == 1, rec.Conn.TLSResumed, "exchange %d", i)
				}
			}
			rec, err := tr.Exchange(context.Background(), query(testutil.NXName, dns.TypeA))
			require.NoError(t, err)
			require.Equal(t, transport.StatusNXDomain, rec.Status)
		})
	}
}

func TestAioquicDoQ(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		aq := testutil.StartAioquicDoQ(t, false)
		sess := transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true, Versions: true})
		tr, err := transport.New(aq.QUIC, transport.Options{RootCAs: aq.Cert.Pool, Session: sess, ZeroRTT: true})
		require.NoError(t, err)
		defer tr.Close()
		first, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
		require.NoError(t, err)
		require.Equal(t, transport.StatusOK, first.Status)
		require.Contains(t, first.Answers[0], testutil.ZoneA)
		require.Equal(t, "doq", first.Conn.ALPN)
		requireTimingOrder(t, first, false)
		// A fresh connection waits a moment (ticketGrace) for its ticket
		// before it closes; under the race detector aioquic's ticket has
		// come too late for it once. Another fresh exchange then brings
		// one: what is tested is the resumption with it.
		for try := 0; try < 5 && sess.TicketLifetime() == 0; try++ {
			_, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
			require.NoError(t, err)
		}
		require.Positive(t, sess.TicketLifetime(), "aioquic sends a session ticket")
		second, err := tr.Exchange(context.Background(), query(testutil.ZoneName, dns.TypeA))
		require.NoError(t, err)
		require.True(t, second.Conn.TLSResumed)
		require.True(t, second.Conn.Attempted0RTT)
		require.True(t, second.Conn.Used0RTT, "aioquic accepts 0-RTT with its ticket store")
		requireTimingOrder(t, second, true)
	})
	t.Run("retry", func(t *testing.T) {
		aq := testutil.StartAioquicDoQ(t, true)
		rec := exchange(t, aq.QUIC, transport.Options{RootCAs: aq.Cert.Pool}, query(testutil.ZoneName, dns.TypeA))
		require.True(t, rec.Conn.Retry, "aioquic --retry sends a Retry to every new connection")
		require.Equal(t, transport.StatusOK, rec.Status)
	})
}

// TestZeroRTTRejectedIsResent makes CoreDNS forget its ticket keys between
// two connections: the second attempts 0-RTT, is refused, and the query is
// resent after the handshake on the same connection.
func TestZeroRTTRejectedIsResent(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	for _, url := range []string{cd.QUIC, cd.H3} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) {
			sess := transport.NewSession(transport.SessionConfig{Tickets: true})
			opts := transport.Options{RootCAs: cd.Cert.Pool, Session: sess, ZeroRTT: true}
			exchange(t, url, opts, query(testutil.ZoneName, dns.TypeA))
			cd.Restart()
			rec := exchange(t, url, opts, query(testutil.ZoneName, dns.TypeA))
			require.Equal(t, transport.StatusOK, rec.Status)
			require.True(t, rec.Conn.Attempted0RTT)
			require.True(t, rec.Conn.Rejected0RTT)
			require.False(t, rec.Conn.Used0RTT)
			if strings.HasPrefix(url, "quic") {
				// DoQ goes on over the rejected connection: a full handshake.
				// DoH/3 redials, and may resume with the ticket the restarted
				// server issued on the rejected connection.
				require.False(t, rec.Conn.TLSResumed)
			}
			requireTimingOrder(t, rec, false)
		})
	}
}

package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/doxlab/doxlab/internal/dnswire"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		in    string
		proto string
		host  string
		port  int
		path  string
		err   string
	}{
		{"udp://127.0.0.1", ProtoUDP, "127.0.0.1", 53, "", ""},
		{"tcp://dns.example:5353", ProtoTCP, "dns.example", 5353, "", ""},
		{"tls://[::1]", ProtoDoT, "::1", 853, "", ""},
		{"quic://[2001:db8::1]:8853", ProtoDoQ, "2001:db8::1", 8853, "", ""},
		{"https://dns.example", ProtoDoH2, "dns.example", 443, "/dns-query", ""},
		{"https://dns.example/resolve?ct", ProtoDoH2, "dns.example", 443, "/resolve?ct", ""},
		{"https://dns.example/", ProtoDoH2, "dns.example", 443, "/", ""},
		{"h3://127.0.0.1:8443/q", ProtoDoH3, "127.0.0.1", 8443, "/q", ""},
		{"127.0.0.1", "", "", 0, "", "want scheme://host"},
		{"ftp://x", "", "", 0, "", "unknown scheme"},
		{"udp://", "", "", 0, "", "no host"},
		{"udp://x:99999", "", "", 0, "", "bad port"},
		{"udp://x:0", "", "", 0, "", "bad port"},
		{"tls://x/path", "", "", 0, "", "takes no path"},
		{"https://[::1", "", "", 0, "", "bad server URL"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			ep, err := ParseURL(c.in)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.proto, ep.Protocol)
			require.Equal(t, c.host, ep.Host)
			require.Equal(t, c.port, ep.Port)
			require.Equal(t, c.path, ep.Path)
		})
	}
}

// TestResolverIsWhoAnswers: an ODoH URL's resolver is its target's host
// (the proxy only relays), with or without a port or brackets; any other
// URL's is its own host.
func TestResolverIsWhoAnswers(t *testing.T) {
	for in, want := range map[string]string{
		"odoh://proxy.example/dns-query?target=res.example":                 "res.example",
		"odoh://proxy.example:8443/proxy?target=res.example:4443/dns-query": "res.example",
		"odoh://[2001:db8::1]/dns-query?target=[2001:db8::53]:443":          "2001:db8::53",
		"odoh://proxy.example/dns-query?target=[2001:db8::53]":              "2001:db8::53",
		"https://res.example/dns-query":                                     "res.example",
		"quic://[::1]:8853":                                                 "::1",
	} {
		ep, err := ParseURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, ep.Resolver(), in)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := New("https://x", Options{HTTPVersion: "4"})
	require.ErrorContains(t, err, "unknown HTTP version")
	_, err = New("https://x", Options{Method: "put"})
	require.ErrorContains(t, err, "unknown DoH method")
	_, err = New("udp://x", Options{LocalAddr: "not-an-ip"})
	require.ErrorContains(t, err, "bad local address")
	for _, ok := range []string{"127.0.0.1", ":5353", "127.0.0.1:5353", "[::1]:53", "::1"} {
		_, err = New("udp://x", Options{LocalAddr: ok})
		require.NoError(t, err, ok)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Status
	}{
		{context.DeadlineExceeded, StatusTimeout},
		{context.Canceled, StatusCanceled},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, StatusRefused},
		{&net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH}, StatusUnreach},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, StatusClosed},
		{&net.DNSError{Err: "no such host", Name: "x"}, StatusResolve},
		{malformed("x"), StatusMalformed},
		{&HTTPError{Code: 502}, StatusHTTP},
		{fmt.Errorf("wrapped: %w", io.EOF), StatusClosed},
		{io.ErrUnexpectedEOF, StatusClosed},
		{http2.StreamError{StreamID: 1, Code: http2.ErrCodeRefusedStream}, StatusReset},
		{&quic.StreamError{StreamID: 0, ErrorCode: 2, Remote: true}, StatusReset},
		{&quic.StreamError{StreamID: 0, ErrorCode: 2}, StatusQUIC},
		{tlsErr(io.EOF), StatusTLS},
		{errClosed, StatusClosed},
		{errors.New("odd"), StatusError},
	}
	for _, c := range cases {
		require.Equal(t, c.want, Classify(c.err), "%v", c.err)
	}
}

func TestPadding(t *testing.T) {
	for _, name := range []string{"a.", "example.test.", "a-much-longer-name.with.several.labels.example.test."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeAAAA)
		pad(q)
		pad(q) // idempotent: one padding option
		wire, err := q.Pack()
		require.NoError(t, err)
		require.Zero(t, len(wire)%128, "%s: %d octets", name, len(wire))
		require.Len(t, q.IsEdns0().Option, 1)
	}
}

func TestDoQPrefixedByALPN(t *testing.T) {
	for alpn, want := range map[string]bool{"doq": true, "doq-i11": true, "doq-i04": true, "doq-i03": false, "doq-i00": false} {
		require.Equal(t, want, dnswire.DoQPrefixed(alpn), alpn)
	}
}

// TestRejectedZeroRTTSeenAfterFastHandshake: when the handshake, and with
// it the server's refusal of early data, completes before DialEarly
// returns, the connection is not marked early, yet every stream fails
// with the rejection until the continuation is taken. CI saw DoH/3 give
// up on that error instead of redialling.
func TestRejectedZeroRTTSeenAfterFastHandshake(t *testing.T) {
	qc := &quicConn{} // early == false: the handshake was already done
	require.True(t, qc.rejected0RTT(fmt.Errorf("http3: conn unusable: %w", quic.Err0RTTRejected)))
	require.False(t, qc.rejected0RTT(errors.New("stream reset")))
	require.False(t, qc.rejected0RTT(nil))
}

func TestMuxFailsPendingWhenReaderStops(t *testing.T) {
	block := make(chan struct{})
	m := newMux(func([]byte) (time.Time, error) { return time.Time{}, nil }, func() ([]byte, error) { <-block; return nil, io.EOF }, nil, true)
	done := make(chan error)
	go func() {
		_, _, _, err := m.exchange(context.Background(), make([]byte, 12))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	close(block)
	require.Equal(t, StatusClosed, Classify(<-done))
	require.False(t, m.alive())
}

// TestMuxHoldsBackIDsBoundedly: a connection holds back from new queries
// the IDs answered last (a duplicate answer would pass for the next
// query's) and those given up on (a late answer would), each to a bound:
// the 256 answered last, the oldest let go first, and 1,024 abandoned;
// a late answer frees its ID. Past the bounds, nothing grows.
func TestMuxHoldsBackIDsBoundedly(t *testing.T) {
	answers := make(chan []byte)
	sent := make(chan uint16, 1) // each query's ID as written
	m := newMux(func(b []byte) (time.Time, error) {
		sent <- binary.BigEndian.Uint16(b)
		return time.Time{}, nil
	}, func() ([]byte, error) { return <-answers, nil }, nil, true)
	wire := func(id uint16) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint16(b, id)
		return b
	}
	held := func(id uint16) (recent int, abandoned bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.recentSet[id], m.abandoned[id]
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// givenUp asks with a cancelled context: the query is written and
	// given up on at once. It returns the ID it went with.
	givenUp := func(id uint16) uint16 {
		done := make(chan error, 1)
		go func() { _, _, _, err := m.exchange(ctx, wire(id)); done <- err }()
		id = <-sent
		require.ErrorIs(t, <-done, context.Canceled)
		return id
	}

	// Answer maxRecent+10 queries, IDs 0, 1, ...: each keeps its ID, and
	// the ring holds the last maxRecent of them.
	for i := range maxRecent + 10 {
		done := make(chan arrival, 1)
		go func() {
			a, _, _, err := m.exchange(context.Background(), wire(uint16(i)))
			if err != nil {
				a.msg = wire(0xffff) // no query's: the check below fails
			}
			done <- a
		}()
		require.Equal(t, uint16(i), <-sent, "an ID nothing holds back is kept")
		answers <- wire(uint16(i))
		require.Equal(t, uint16(i), binary.BigEndian.Uint16((<-done).msg))
	}
	m.mu.Lock()
	require.Equal(t, maxRecent, len(m.recentSet))
	m.mu.Unlock()
	r, _ := held(9)
	require.Zero(t, r, "the oldest answered IDs are let go")
	r, _ = held(10)
	require.Equal(t, 1, r)
	require.NotEqual(t, uint16(maxRecent+9), givenUp(maxRecent+9), "the ID answered last goes to no new query")

	// Give up on maxAbandoned+76 queries: the set stops at its bound.
	for i := range maxAbandoned + 76 {
		givenUp(uint16(1000 + i))
	}
	anyAbandoned := func() uint16 {
		m.mu.Lock()
		defer m.mu.Unlock()
		require.Equal(t, maxAbandoned, len(m.abandoned))
		require.Empty(t, m.pending)
		for id := range m.abandoned {
			return id
		}
		return 0
	}
	one := anyAbandoned()
	require.NotEqual(t, one, givenUp(one), "an abandoned ID is held back")
	late := anyAbandoned()
	answers <- wire(late) // its answer, at last
	require.Eventually(t, func() bool { _, a := held(late); return !a }, 5*time.Second, time.Millisecond, "a late answer frees its ID")
}

// TestProtocolOfIsTheRecords: ProtocolOf names each URL and HTTP version
// as the records of its transport do, read from a real exchange (one
// that fails: nothing listens), so that a run nothing answered is named
// as one that was answered would have been.
func TestProtocolOfIsTheRecords(t *testing.T) {
	ln, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.LocalAddr().(*net.UDPAddr).Port
	ln.Close() // a port nothing listens on, over UDP and (most likely) TCP
	for _, c := range []struct {
		scheme, version, want string
	}{
		{"udp", "", ProtoUDP}, {"tcp", "", ProtoTCP}, {"tls", "", ProtoDoT}, {"quic", "", ProtoDoQ},
		{"https", "", ProtoDoH2}, {"https", "2", ProtoDoH2}, {"https", "1.1", ProtoDoH1}, {"https", "3", ProtoDoH3},
		{"h3", "", ProtoDoH3},
	} {
		url := fmt.Sprintf("%s://127.0.0.1:%d", c.scheme, port)
		opts := Options{HTTPVersion: c.version, Timeout: 500 * time.Millisecond, Insecure: true}
		got, err := ProtocolOf(url, opts)
		require.NoError(t, err, url)
		require.Equal(t, c.want, got, "%s over HTTP %q", url, c.version)
		tr, err := New(url, opts)
		require.NoError(t, err)
		rec, err := tr.Exchange(context.Background(), new(dns.Msg).SetQuestion("example.", dns.TypeA))
		tr.Close()
		require.Error(t, err, url)
		require.Equal(t, got, rec.Protocol, "%s over HTTP %q: the record's name", url, c.version)
	}
	_, err = ProtocolOf("https://127.0.0.1", Options{HTTPVersion: "4"})
	require.ErrorContains(t, err, `unknown HTTP version "4"`)
	_, err = ProtocolOf("ftp://127.0.0.1", Options{})
	require.ErrorContains(t, err, "unknown scheme")
}

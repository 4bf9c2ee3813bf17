package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/server"
)

// TestZeroRTTConnClosedBeforeItsFinished: a client that asks in 0-RTT
// and closes before its Finished reaches the server was served, and the
// server records the connection, unfinished, with its 0-RTT. It wrote no
// record of it, so a one-request page load in 0-RTT, which closes as soon
// as its answer came with the server's first flight, went without the
// server's word in the web experiment (2 loads of 40 beside four busy
// loops). Here the client never hears the server (a relay drops every
// reply), so it cannot send its Finished, whatever the machine's speed.
func TestZeroRTTConnClosedBeforeItsFinished(t *testing.T) {
	ts := start(t, nil)
	pem, err := os.ReadFile(ts.caFile)
	require.NoError(t, err)
	tickets := &countingCache{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	conf := &tls.Config{RootCAs: certPool(pem), ServerName: "localhost", NextProtos: []string{"doq"}, ClientSessionCache: tickets}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A first connection, whole, for a ticket.
	c, err := quic.DialAddr(ctx, ts.Addr("doq").String(), conf, nil)
	require.NoError(t, err)
	doqExchange(t, c, "a.example")
	require.Eventually(t, func() bool { return tickets.puts.Load() > 0 }, 5*time.Second, 10*time.Millisecond, "a session ticket")
	require.NoError(t, c.CloseWithError(0, ""))

	// The second asks in 0-RTT through the deaf relay, and closes once the
	// server has answered its query.
	early, err := quic.DialAddrEarly(ctx, deafRelay(t, ts.Addr("doq").String()), conf, nil)
	require.NoError(t, err)
	st, err := early.OpenStream()
	require.NoError(t, err)
	_, err = st.Write(doqQuery("b.example"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(queriesOf(ts, "b.example.")) > 0 }, 5*time.Second, 10*time.Millisecond, "the server answered the 0-RTT query")
	require.NoError(t, early.CloseWithError(0, ""))

	var rec *server.Record
	require.Eventually(t, func() bool {
		for _, r := range ts.records("conn", "doq") {
			if r.Unfinished {
				rec = &r
			}
		}
		return rec != nil
	}, 5*time.Second, 10*time.Millisecond, "the server's record of the unfinished connection")
	require.True(t, rec.Used0RTT)
	require.True(t, rec.Resumed)
	require.Zero(t, rec.HandshakeMs, "no handshake time it did not see")
	require.Empty(t, rec.Error, "a clean close (DOQ_NO_ERROR)")
	require.Equal(t, "doq", rec.ALPN)
	q := queriesOf(ts, "b.example.")[0]
	require.True(t, q.Used0RTT)
	require.True(t, q.EarlyData, "taken before the handshake completed")
}

// countingCache counts the tickets a client is given.
type countingCache struct {
	tls.ClientSessionCache
	puts atomic.Int64
}

func (c *countingCache) Put(key string, cs *tls.ClientSessionState) {
	if cs != nil {
		c.puts.Add(1)
	}
	c.ClientSessionCache.Put(key, cs)
}

// deafRelay relays a client's datagrams to target and drops every
// reply: a client behind it never hears the server.
func deafRelay(t *testing.T, target string) string {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	back, err := net.Dial("udp", target)
	require.NoError(t, err)
	t.Cleanup(func() { front.Close(); back.Close() })
	go func() {
		b := make([]byte, 65536)
		for {
			n, _, err := front.ReadFromUDP(b)
			if err != nil {
				return
			}
			back.Write(b[:n])
		}
	}()
	return front.LocalAddr().String()
}

// doqQuery is a DoQ query for name's A record, length-prefixed (ID 0, as
// RFC 9250 has it).
func doqQuery(name string) []byte {
	q := query(name)
	q.Id = 0
	m, _ := q.Pack()
	b, _ := dnswire.AppendPrefixed(nil, m)
	return b
}

// doqExchange asks for name on a stream of c and reads the answer.
func doqExchange(t *testing.T, c *quic.Conn, name string) {
	t.Helper()
	st, err := c.OpenStream()
	require.NoError(t, err)
	_, err = st.Write(doqQuery(name))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = dnswire.ReadPrefixed(st)
	require.NoError(t, err)
}

// queriesOf are the server's query records for qname.
func queriesOf(ts *testServer, qname string) []server.Record {
	var out []server.Record
	for _, r := range ts.records("query", "doq") {
		if r.QName == qname {
			out = append(out, r)
		}
	}
	return out
}

// TestClosedClean: an unfinished connection's record carries no error
// when its client's application closed it without one, or before the
// handshake, where QUIC hides the application's code; anything else
// (an error code, a close of ours, a timeout) is the record's error.
func TestClosedClean(t *testing.T) {
	for _, c := range []struct {
		err   error
		clean bool
	}{
		{&quic.ApplicationError{Remote: true, ErrorCode: 0}, true},      // DOQ_NO_ERROR, or an HTTP/3 client's 0
		{&quic.ApplicationError{Remote: true, ErrorCode: 0x100}, true},  // H3_NO_ERROR
		{&quic.ApplicationError{Remote: true, ErrorCode: 0x102}, false}, // H3_INTERNAL_ERROR
		{&quic.ApplicationError{Remote: false, ErrorCode: 0}, false},    // the server closed it
		{&quic.TransportError{Remote: true, ErrorCode: quic.ApplicationErrorErrorCode}, true},
		{&quic.TransportError{Remote: true, ErrorCode: quic.ProtocolViolation}, false},
		{&quic.IdleTimeoutError{}, false},
		{fmt.Errorf("closing: %w", &quic.ApplicationError{Remote: true}), true},
		{nil, false},
	} {
		require.Equal(t, c.clean, server.ClosedClean(c.err), "%v", c.err)
	}
}

package pageload

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestRejectedBeforeTheHandshakeEnds: quic-go's HTTP/3 closes a 0-RTT
// connection with H3_INTERNAL_ERROR before its handshake completes when
// it opens its control stream only after the server turned the 0-RTT
// down (a late goroutine; CI saw it). The loader takes that close for
// the rejection and asks again; any other end of a connection whose
// handshake never completed stays a failure.
func TestRejectedBeforeTheHandshakeEnds(t *testing.T) {
	ticket, _ := ticketServer(t)
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // takes the 0-RTT, never answers
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	for _, c := range []struct {
		name     string
		code     quic.ApplicationErrorCode
		early    bool
		rejected bool
	}{
		{"HTTP/3's close of a lost control stream", quic.ApplicationErrorCode(http3.ErrCodeInternalError), true, true},
		{"another close", quic.ApplicationErrorCode(http3.ErrCodeNoError), true, false},
		{"a connection that sent no 0-RTT", quic.ApplicationErrorCode(http3.ErrCodeInternalError), false, false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		qc, err := quic.DialAddrEarly(ctx, silent.LocalAddr().String(), ticket(), &quic.Config{})
		cancel()
		require.NoError(t, err, c.name)
		require.False(t, handshakeDone(qc), "%s: the 0-RTT connection is open before its handshake", c.name)
		qc.CloseWithError(c.code, "")
		<-qc.Context().Done()
		oc := &originConn{qc: qc, offered: c.early}
		err = errors.New("connection closed before the server's SETTINGS")
		require.Equal(t, c.rejected, oc.rejected(err), c.name)
		require.True(t, oc.rejected(quic.Err0RTTRejected), "%s: quic-go's own error is always the rejection", c.name)
	}
}

// ticketServer starts a quic-go server that allows 0-RTT and returns a
// function giving a client configuration that holds a fresh ticket for
// testutil.ServerName from a handshake with it (a ticket is used once),
// and the address of a second server with the same certificate and
// other ticket keys, which rejects that ticket's 0-RTT.
func ticketServer(t *testing.T) (func() *tls.Config, string) {
	t.Helper()
	cert := testutil.NewCert(t)
	pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
	require.NoError(t, err)
	listen := func() *quic.EarlyListener {
		ln, err := quic.ListenAddrEarly("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{http3.NextProtoH3}},
			&quic.Config{Allow0RTT: true})
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		testutil.ServeQUIC(ln, func(c *quic.Conn) { <-c.Context().Done() })
		return ln
	}
	ln, other := listen(), listen()
	return func() *tls.Config {
		got := make(chan struct{}, 1)
		conf := &tls.Config{ServerName: testutil.ServerName, RootCAs: cert.Pool, NextProtos: []string{http3.NextProtoH3},
			ClientSessionCache: &signalledCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), put: got}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		qc, err := quic.DialAddr(ctx, ln.Addr().String(), conf, &quic.Config{})
		require.NoError(t, err)
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("no session ticket from the server")
		}
		qc.CloseWithError(0, "")
		return conf
	}, other.Addr().String()
}

// TestRejectedBeforeTheDialReturned: on a busy machine a 0-RTT
// handshake can end, its 0-RTT turned down, before the dial returns;
// the connection is then opened as one without 0-RTT, and quic-go's
// HTTP/3 closes it with H3_INTERNAL_ERROR as its control stream cannot
// be opened (quic-go keeps a rejected connection's streams for its
// NextConnection). The loader still takes that for the rejection (CI
// saw a coalesced lookup fail so): the connection's ticket allowed
// 0-RTT, which the connection's view of the tickets tells.
func TestRejectedBeforeTheDialReturned(t *testing.T) {
	ticket, rejecting := ticketServer(t)
	for _, early := range []bool{true, false} {
		conf := ticket()
		tokens := newTokenKeeper(TokensKeep).forConn(conf.ClientSessionCache)
		conf.ClientSessionCache = tokens.Tickets()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		dial := quic.DialAddr
		if early {
			dial = quic.DialAddrEarly
		}
		qc, err := dial(ctx, rejecting, conf, &quic.Config{})
		require.NoError(t, err)
		select { // the handshake ends before the loader looks
		case <-qc.HandshakeComplete():
		case <-ctx.Done():
			t.Fatal("no handshake")
		}
		cancel()
		require.False(t, qc.ConnectionState().Used0RTT)
		require.True(t, tokens.EarlyTicket(), "the ticket handed to the handshake allows 0-RTT")
		oc := &originConn{qc: qc, offered: early && tokens.EarlyTicket()} // as dialH3 sets it
		if early {
			rc := (&http3.Transport{}).NewRawClientConn(qc)
			select {
			case <-rc.ReceivedSettings():
				t.Fatal("SETTINGS arrived on a connection whose 0-RTT was rejected")
			case <-qc.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the rejected connection stays open")
			}
			require.True(t, lostControlStream(context.Cause(qc.Context())), "HTTP/3 closed it: %v", context.Cause(qc.Context()))
		}
		err = errors.New("connection closed before the server's SETTINGS")
		require.Equal(t, early, oc.rejected(err), "dialled early: %v", early)
		qc.CloseWithError(0, "")
	}
}

// signalledCache says when a ticket is put.
type signalledCache struct {
	tls.ClientSessionCache
	put chan struct{}
}

func (s *signalledCache) Put(key string, cs *tls.ClientSessionState) {
	s.ClientSessionCache.Put(key, cs)
	if cs != nil {
		select {
		case s.put <- struct{}{}:
		default:
		}
	}
}

// TestPriorityHeaderIsChromiums: a replay's requests carry the RFC 9218
// Priority Chromium sent for their DevTools priority and type, so the
// server orders the responses as it ordered the browser's: urgency 0 to
// 4 from VeryHigh to VeryLow, the default (3, Low) left out, documents
// and images incremental; a priority DevTools never names asks for none.
func TestPriorityHeaderIsChromiums(t *testing.T) {
	for _, c := range []struct{ priority, typ, want string }{
		{"VeryHigh", "Document", "u=0, i"},
		{"High", "Script", "u=1"},
		{"High", "Stylesheet", "u=1"},
		{"Medium", "Font", "u=2"},
		{"Medium", "Image", "u=2, i"},
		{"Low", "Image", "i"},
		{"Low", "Script", ""},
		{"VeryLow", "Fetch", "u=4"},
		{"", "Image", ""},
		{"Urgent", "Document", ""},
		{"high", "Script", ""}, // DevTools' names are capitalised
	} {
		require.Equal(t, c.want, priorityHeader(c.priority, c.typ), "%s %s", c.priority, c.typ)
	}
}

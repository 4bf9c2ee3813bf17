package verify_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/verify"
)

// TestDoQVerdicts: each of the survey's verdicts from the server that
// earns it, on loopback. DoQ answered (and resumed, its ticket's lifetime
// read); a DoQ handshake whose streams are never answered, or answered
// for another question (an answer's ID is not checked: a stream is its
// query's, RFC 9250 §4.2.1); QUIC that will not speak DoQ (its Version
// Negotiation read); and no QUIC at all.
func TestDoQVerdicts(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{DoQ: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
	cert := testutil.NewCert(t)
	silent := testutil.QUICPeer(t, cert, []string{"doq"}, func(s *quic.Stream) { io.Copy(io.Discard, s) })
	otherName := testutil.QUICPeer(t, cert, []string{"doq"}, func(s *quic.Stream) {
		defer s.Close()
		b, err := dnswire.ReadPrefixed(s)
		q := new(dns.Msg)
		if err != nil || q.Unpack(b) != nil {
			return
		}
		a := new(dns.Msg).SetReply(q)
		a.Question[0].Name = "elsewhere.example."
		wire, _ := a.Pack()
		wire, _ = dnswire.AppendPrefixed(nil, wire)
		s.Write(wire)
	})
	h3 := testutil.QUICPeer(t, cert, []string{"h3"}, func(*quic.Stream) {})
	nothing := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))

	o := verify.Options{Timeout: time.Second}
	ctx := context.Background()
	r := verify.VerifyDoQ(ctx, srv.Addr("doq").String(), o)
	require.Equal(t, "doq", r.Verdict, r.Error)
	require.Equal(t, "doq", r.ALPN)
	require.Equal(t, "NOERROR", r.Rcode)
	require.True(t, r.Resumed, "the second connection resumed the first's session")
	require.Positive(t, r.TicketLifetimeS)
	require.NotNil(t, r.Cert)

	for _, c := range []struct {
		name, target, verdict, err string
	}{
		{"silent", silent, "handshake-only", "no answer within"},
		{"another question", otherName, "handshake-only", "answer is for elsewhere.example. A, not example.com. A"},
		{"HTTP/3 only", h3, "quic-not-doq", "no application protocol"},
		{"nothing", nothing, "no-quic", ""},
	} {
		r := verify.VerifyDoQ(ctx, c.target, o)
		require.Equal(t, c.verdict, r.Verdict, "%s: %s", c.name, r.Error)
		require.Contains(t, r.Error, c.err, c.name)
		require.Empty(t, r.Rcode, c.name)
		require.False(t, r.Resumed, c.name)
	}
	r = verify.VerifyDoQ(ctx, h3, o)
	require.NotEmpty(t, r.Offered, "quic-go's Version Negotiation lists its versions")
	require.NotContains(t, r.Offered, "0xff00001d", "and no draft: the draft client is not tried")
}

package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
)

// TestVerifyEveryProtocol verifies a server on the standard ports (DoQ
// and DoT on 853, DoH on 443: the survey's method), on a loopback
// address of its own, as an ODoH target: each protocol's line says what
// the server does, the DoH line its endpoints, versions and its rung of
// the privacy ladder; --json gives the same as objects.
func TestVerifyEveryProtocol(t *testing.T) {
	testutil.NeedRoot(t, "the standard ports need root")
	const ip = "127.0.0.77"
	srv, err := server.New(&server.Config{
		Listen:  server.Listen{DoQ: ip + ":853", DoT: ip + ":853", DoH: ip + ":443", DoH3: ip + ":443"},
		Answers: server.Answers{Any: "192.0.2.1"},
		ODoH:    server.ODoH{Target: true},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()

	code, out, errOut := run("verify", "--protocols", "doq,dot,doh", ip)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^doq `+ip+`:853 +doq +v1 +doq +rcode NOERROR +retry no +token yes +resumed yes +0-RTT yes +cert ECDSA-256 \d+B$`, out)
	require.Regexp(t, `(?m)^dot `+ip+`:853 +answers yes TLS 1\.3 +alpn-dot yes no-alpn yes keepalive no`, out)
	require.Regexp(t, `(?m)^doh `+ip+`:443 +endpoints 3  HTTP/1\.1 yes /2 yes /3 yes alt-svc "h3=\\":443\\"; ma=86400" TLS 1\.2,1\.3  odoh target  ech no$`, out)
	require.Contains(t, out, "ODoH: a sealed query answered                            1  100.0%")

	code, out, errOut = run("verify", "--json", "--protocols", "doh", ip)
	require.Equal(t, 0, code, errOut)
	line, _, _ := strings.Cut(out, "\n")
	var doh struct {
		HTTP3       bool `json:"http3"`
		ODoHAnswers bool `json:"odoh_answers"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &doh), line)
	require.True(t, doh.HTTP3)
	require.True(t, doh.ODoHAnswers)
}

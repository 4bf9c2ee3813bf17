package verify

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPassedNeedsEveryProtocol: a host is a target only if it passed all
// asked for, and a peer's strings cannot add a line to the file.
func TestPassedNeedsEveryProtocol(t *testing.T) {
	sv := &Survey{
		DoQ: []*DoQ{
			{Target: "192.0.2.10:853", Verdict: "doq", QUICVersion: "v1", ALPN: "doq", Retry: true, Resumed: true},
			{Target: "192.0.2.2:853", Verdict: "doq", QUICVersion: "v1", ALPN: "doq\n10.9.9.9"},
			{Target: "192.0.2.3:853", Verdict: "handshake-only"},
		},
		DoH: []*DoH{{Target: "192.0.2.10:443", Endpoints: []string{"/dns-query application/dns-message POST"}, HTTP3: true}},
	}
	both, err := sv.Passed([]string{"doq", "doh"})
	require.NoError(t, err)
	require.Equal(t, []Passed{{Host: "192.0.2.10", Facts: []string{"doq QUIC v1 ALPN doq, Retry, resumed", "doh /dns-query application/dns-message POST, HTTP/3"}}}, both)
	doq, err := sv.Passed([]string{"doq"})
	require.NoError(t, err)
	require.Len(t, doq, 2, "handshake-only is no DoQ")
	require.Equal(t, "192.0.2.2", doq[0].Host, "in address order")
	var b strings.Builder
	require.NoError(t, WriteTargets(&b, doq, "test"))
	require.Equal(t, 3, strings.Count(b.String(), "\n"), "a header and two hosts: %q", b.String())
	require.Contains(t, b.String(), `doq\x0a10.9.9.9`)
	_, err = sv.Passed([]string{"udp"})
	require.ErrorContains(t, err, `cannot select on "udp"`)
}

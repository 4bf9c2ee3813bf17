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

// TestSurveyTables: the survey counts each finding over the resolvers
// verified, the most frequent first, with its share; the privacy
// ladder's findings are listed even where none has them (none is a
// finding too), and a protocol nobody was verified over has no table.
func TestSurveyTables(t *testing.T) {
	cfg := &ODoHConfig{KEM: 0x20, KDF: 1, AEAD: 1, KeyID: "0011223344556677"}
	sv := &Survey{DoH: []*DoH{
		{Target: "192.0.2.1:443", Endpoints: []string{"/dns-query application/dns-message GET"}, HTTP2: true, HTTP3: true, AltSvc: `h3=":443"`,
			TLSVersions: []string{"1.3"}, ODoH: cfg, ODoHAnswers: true, ODoHInHTTPS: cfg, ECH: "public.example"},
		{Target: "192.0.2.2:443", Endpoints: []string{"/dns-query application/dns-message GET"}, HTTP2: true, TLSVersions: []string{"1.2", "1.3"}},
		{Target: "192.0.2.3:443"},
	}}
	// The columns as a reader reads them, spaces aside.
	written := func(sv *Survey) string {
		var b strings.Builder
		sv.Write(&b)
		lines := strings.Split(b.String(), "\n")
		for i, l := range lines {
			lines[i] = strings.Join(strings.Fields(l), " ")
		}
		return strings.Join(lines, "\n")
	}
	out := written(sv)
	require.Contains(t, out, "DoH endpoints: path, content type, method (Table 1) (of 3):")
	require.Contains(t, out, "/dns-query application/dns-message GET 2 66.7%")
	require.Contains(t, out, "no DoH endpoint 1 33.3%")
	require.Contains(t, out, "ODoH config in its own HTTPS record (odohconfig) 1 33.3%")
	require.Contains(t, out, "TLS 1.3 2 66.7%")
	require.NotContains(t, out, "DoQ", "no DoQ verified, no DoQ table")
	require.NotContains(t, out, "certificates", "no certificate seen, no table")
	require.Less(t, strings.Index(out, "TLS 1.3"), strings.Index(out, "TLS 1.2"), "the most frequent first")

	none := written(&Survey{DoH: []*DoH{{Target: "192.0.2.2:443"}}})
	require.Contains(t, none, "ODoH: a sealed query answered 0 0.0%", "none is a finding too")
	require.True(t, (&Survey{}).Empty())
}

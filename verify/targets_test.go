package verify

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadTargets(t *testing.T) {
	in := "saddr,sport\n192.0.2.1,784\n# a comment\n\n192.0.2.2\n[2001:db8::1]:8853\n"
	got, err := readTargets(strings.NewReader(in), "t.csv", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1:784", "192.0.2.2:853", "[2001:db8::1]:8853"}, got)

	_, err = readTargets(strings.NewReader("192.0.2.1\nnot-an-ip\n"), "t.txt", 853)
	require.EqualError(t, err, `t.txt:2: "not-an-ip" is not an IP address or IP:PORT`)

	// As editors save it: a byte order mark before the first target (it
	// was taken for a CSV header, and the target dropped unsaid), CRLF
	// lines, a note after a # with commas in it.
	got, err = readTargets(strings.NewReader("\ufeff192.0.2.9\r\n192.0.2.1:784  # DoT, DoH: ok\r\n"), "t.txt", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.9:853", "192.0.2.1:784"}, got)
	got, err = readTargets(strings.NewReader("\ufeffsaddr,sport\r\n192.0.2.1,784\r\n"), "t.csv", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1:784"}, got, "ZMap's header, after a byte order mark")
}

// TestTarget: an IP with a port, or a bare IP given the default port;
// nothing else passes for one, though it holds a colon.
func TestTarget(t *testing.T) {
	for in, want := range map[string]string{"192.0.2.1": "192.0.2.1:853", " 192.0.2.1:784 ": "192.0.2.1:784", "2001:db8::1": "[2001:db8::1]:853", "[2001:db8::1]:8853": "[2001:db8::1]:8853"} {
		got, err := Target(in, 853)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"ftp://x", "dns.example:853", "192.0.2.1:99999", "192.0.2.1:0", "192.0.2.1:abc", "[::1", "fe80::1%eth0", ""} {
		_, err := Target(bad, 853)
		require.Error(t, err, bad)
	}
}

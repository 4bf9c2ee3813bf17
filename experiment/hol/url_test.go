package hol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/transport"
)

// TestEveryTransportHasItsServer: each transport the experiment knows
// reaches the server's listener for it on one connection kept open: the
// in-order variants their own ports (a server that answers one query
// at a time), DoH its HTTP version; and every one is a transport doxlab
// can open.
func TestEveryTransportHasItsServer(t *testing.T) {
	want := map[string]string{"tcp-inorder": "tcp://10.200.0.2:5353", "dot-inorder": "tls://10.200.0.2:8853"}
	versions := map[string]string{"doh1": "1.1", "doh2": "2"}
	urls := map[string]bool{}
	for _, tr := range Transports {
		url, opts := holURL(tr, "10.200.0.2")
		require.True(t, opts.Reuse, "%s: one connection for every query", tr)
		require.Equal(t, versions[tr], opts.HTTPVersion, tr)
		if w, ok := want[tr]; ok {
			require.Equal(t, w, url)
		}
		require.True(t, strings.Contains(url, "10.200.0.2"), "%s: %s", tr, url)
		require.False(t, urls[url+opts.HTTPVersion], "%s: a server of its own (%s)", tr, url)
		urls[url+opts.HTTPVersion] = true
		x, err := transport.New(url, opts)
		require.NoError(t, err, tr)
		x.Close()
	}
	err := (&HOL{Transports: []string{Transports[0], "carrier-pigeon"}}).defaults()
	require.ErrorContains(t, err, `unknown transport "carrier-pigeon"`)
}

package overhead

import (
	"bytes"
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServerName reads the name from a real ClientHello (Go's, with its
// extensions), and nothing from one cut short or without the extension.
func TestServerName(t *testing.T) {
	hello := func(name string) []byte {
		c, s := net.Pipe()
		defer s.Close()
		go tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake() //nolint:errcheck // only its first flight is read
		b := make([]byte, 16<<10)
		n, err := s.Read(b)
		require.NoError(t, err)
		c.Close()
		require.Equal(t, byte(22), b[0], "a handshake record")
		return b[5:n]
	}
	h := hello("insta.doxlab.test")
	require.Equal(t, "insta.doxlab.test", serverName(h))
	// Cut short before the name's end: nothing. The extensions after it
	// may be missing (a QUIC ClientHello's later CRYPTO frames lost).
	end := bytes.Index(h, []byte("insta.doxlab.test")) + len("insta.doxlab.test")
	for _, cut := range []int{0, 3, 40, end - 1} {
		require.Empty(t, serverName(h[:cut]), "cut at %d", cut)
	}
	require.Equal(t, "insta.doxlab.test", serverName(h[:end]))
	require.Empty(t, serverName(hello("10.200.0.2")), "no SNI for an address")
}

package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/protocol"
)

func TestTable(t *testing.T) {
	require.Equal(t, []string{"udp", "tcp", "dot", "doh2", "doh3", "doq"}, protocol.Default())
	require.Equal(t, []string{"udp", "tcp", "tls", "https", "h3", "quic"}, protocol.Schemes())
	p, ok := protocol.ForScheme("https")
	require.True(t, ok)
	require.Equal(t, protocol.DoH2, p.Name, "https means HTTP/2 unless told otherwise")
	q, _ := protocol.Lookup(protocol.DoQ)
	require.True(t, q.Datagram)
	require.Equal(t, 853, q.Port)
	_, ok = protocol.Lookup("doh4")
	require.False(t, ok)
	require.Equal(t, "a, b or c", protocol.OneOf([]string{"a", "b", "c"}))
}

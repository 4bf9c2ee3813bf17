package overhead

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelloPrefixOutOfOrder gathers a ClientHello's start from small
// CRYPTO frames out of order, as Chromium scatters it: nothing until the
// random and cipher suite octets are all in, then the prefix, once.
func TestHelloPrefixOutOfOrder(t *testing.T) {
	hello := bytes.Repeat([]byte{7}, 300)
	hello[0] = 1
	var h helloPrefix
	require.Nil(t, h.add(40, hello[40:300]), "the tail first")
	require.Nil(t, h.add(3, hello[3:10]))
	require.Nil(t, h.add(10, hello[10:40]))
	require.Nil(t, h.add(0, hello[0:2]), "a hole at 2")
	got := h.add(2, hello[2:5])
	require.Equal(t, hello[:helloPrefixLen], got)
	require.Nil(t, h.add(0, hello[0:100]), "once only")
}

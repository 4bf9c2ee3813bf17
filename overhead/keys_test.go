package overhead

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInitialKeysRFC9001: QUIC v1's Initial secrets, keys, IVs and
// header protection from RFC 9001's Appendix A.1 (the client's
// Destination Connection ID 0x8394c8f03e515708), the nonce of packet
// number 2 and the header protection mask of A.2's sample.
func TestInitialKeysRFC9001(t *testing.T) {
	h := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	dcid := h("8394c8f03e515708")
	initial := hkdfExtract(sha256.New, quicInitialSalt, dcid)
	require.Equal(t, h("7db5df06e7a69e432496adedb00851923595221596ae2ae9fb8115c1e9ed0a44"), initial)
	require.Equal(t, h("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea"), hkdfExpandLabel(sha256.New, initial, "client in", 32))
	require.Equal(t, h("3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b"), hkdfExpandLabel(sha256.New, initial, "server in", 32))

	client, server := initialKeys(dcid)
	require.Equal(t, h("fa044b2f42a3fd3b46fb255c"), client.iv)
	require.Equal(t, h("0ac1493ca1905853b0bba03e"), server.iv)
	require.Equal(t, h("fa044b2f42a3fd3b46fb255e"), client.nonce(2), "the IV xor the packet number")
	mask := make([]byte, 16)
	client.hp.Encrypt(mask, h("d1b1c98dd7689fb8ec11d242b123dc9b"))
	require.Equal(t, h("437b9aec36"), mask[:5])
}

package overhead

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVarintRFC9000: RFC 9000 Appendix A.1's examples, a two-octet
// encoding of a one-octet value, and input cut short, which reads as
// nothing rather than a wrong number.
func TestVarintRFC9000(t *testing.T) {
	for in, want := range map[string]uint64{
		"c2197c5eff14e88c": 151288809941952652,
		"9d7f3e7d":         494878333,
		"7bbd":             15293,
		"25":               37,
		"4025":             37,
	} {
		b, err := hex.DecodeString(in + "ff") // what follows is not read
		require.NoError(t, err)
		v, n := varint(b)
		require.Equal(t, []any{want, len(in) / 2}, []any{v, n}, in)
	}
	for _, short := range []string{"", "40", "9d7f3e", "c2197c5eff14e8"} {
		b, _ := hex.DecodeString(short)
		_, n := varint(b)
		require.Zero(t, n, "%q is cut short", short)
	}
}

// TestDecodePNRFC9000: RFC 9000 Appendix A.3's example, and the
// window's edges: the candidate closest to the next expected number,
// across a wrap of the truncated bits in either direction.
func TestDecodePNRFC9000(t *testing.T) {
	require.Equal(t, int64(0xa82f9b32), decodePN(0xa82f30ea, 0x9b32, 2))
	require.Equal(t, int64(0), decodePN(-1, 0, 1), "the first packet")
	require.Equal(t, int64(256), decodePN(254, 0x00, 1), "past the wrap: 256, not 0")
	require.Equal(t, int64(255), decodePN(256, 0xff, 1), "a late packet before the wrap: 255, not 511")
	require.Equal(t, int64(0x10000), decodePN(0xffff, 0x0000, 2))
	require.Equal(t, int64(0x1_0000_0020), decodePN(0x1_0000_0010, 0x20, 4), "past 32 bits")
}

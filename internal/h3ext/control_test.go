package h3ext

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSettings: what AppendSettings writes, ParseSettings reads back;
// RFC 9114 §7.2.4's errors are refused.
func TestSettings(t *testing.T) {
	in := map[uint64]uint64{SettingMaxFieldSection: 32 << 10, 0x2b603742: 1, SettingQPACKTableCapacity: 0}
	b := AppendSettings(nil, in)
	require.Equal(t, b, AppendSettings(nil, in), "the same octets each time")
	typ, payload, err := ReadFrame(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, uint64(FrameSettings), typ)
	got, err := ParseSettings(payload)
	require.NoError(t, err)
	require.Equal(t, in, got)

	for name, payload := range map[string][]byte{
		"twice":          {0x06, 0x01, 0x06, 0x02},
		"HTTP/2's 0x04":  {0x04, 0x01},
		"no value":       {0x06},
		"cut identifier": {0x40},
	} {
		_, err := ParseSettings(payload)
		require.Error(t, err, name)
	}
}

// TestReadFrameHeaderEOF: a stream that ends between frames is io.EOF;
// one that ends inside a frame is a frame error, never io.EOF.
func TestReadFrameHeaderEOF(t *testing.T) {
	_, _, err := ReadFrameHeader(bytes.NewReader(nil))
	require.ErrorIs(t, err, io.EOF)
	_, _, err = ReadFrameHeader(bytes.NewReader([]byte{0x00}))
	require.ErrorIs(t, err, ErrFrame)
	require.NotErrorIs(t, err, io.EOF)
	err = Skip(bytes.NewReader([]byte{1, 2}), 5)
	require.ErrorIs(t, err, ErrFrame)
	require.NotErrorIs(t, err, io.EOF)
	_, err = ReadPayload(bytes.NewReader(nil), 3)
	require.NotErrorIs(t, err, io.EOF)
}

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

// TestFrameRulesAreRFC9114s: which frame is H3_FRAME_UNEXPECTED where,
// frame type by frame type (RFC 9114 §7.2, the reserved HTTP/2 types of
// §7.2.8, RFC 9412's ORIGIN and RFC 9218's PRIORITY_UPDATE): on a control
// stream DATA, HEADERS, PUSH_PROMISE and HTTP/2's types; on a client's
// request stream PUSH_PROMISE, HTTP/2's types and every control-only
// frame; a type no RFC defines, reserved ones (0x1f*N+0x21) included, is
// ignored on both (§9).
func TestFrameRulesAreRFC9114s(t *testing.T) {
	type rule struct{ onControl, onRequest bool }
	for typ, want := range map[uint64]rule{
		FrameData:               {true, false},
		FrameHeaders:            {true, false},
		0x02:                    {true, true}, // HTTP/2's PRIORITY
		FrameCancelPush:         {false, true},
		FrameSettings:           {false, true},
		FramePushPromise:        {true, true},
		0x06:                    {true, true}, // PING
		FrameGoAway:             {false, true},
		0x08:                    {true, true}, // WINDOW_UPDATE
		0x09:                    {true, true}, // CONTINUATION
		FrameOrigin:             {false, true},
		FrameMaxPushID:          {false, true},
		FramePriorityUpdate:     {false, true},
		FramePriorityUpdatePush: {false, true},
		0x0a:                    {false, false}, // unassigned
		0x21:                    {false, false}, // reserved: 0x1f*0+0x21
		0x1f*7 + 0x21:           {false, false},
		0x2b603742:              {false, false},
	} {
		require.Equal(t, want.onControl, UnexpectedOnControl(typ), "%#x on a control stream", typ)
		require.Equal(t, want.onRequest, UnexpectedOnRequest(typ), "%#x on a request stream", typ)
		require.Equal(t, typ == 0x02 || typ == 0x06 || typ == 0x08 || typ == 0x09, ReservedH2Frame(typ), "%#x", typ)
	}
}

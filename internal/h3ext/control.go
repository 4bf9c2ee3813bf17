package h3ext

import (
	"fmt"
	"maps"
	"slices"

	"github.com/quic-go/quic-go/quicvarint"
)

// HTTP/3's frame and stream types that doxlab's own HTTP/3 layers read
// and write (RFC 9114 §7.2, §6.2; RFC 9218 §7.2 for PRIORITY_UPDATE).
const (
	FrameData                 = 0x00
	FrameHeaders              = 0x01
	FrameCancelPush           = 0x03
	FrameSettings             = 0x04
	FramePushPromise          = 0x05
	FrameGoAway               = 0x07
	FrameMaxPushID            = 0x0d
	FramePriorityUpdate       = 0xf0700 // for a request stream
	FramePriorityUpdatePush   = 0xf0701
	StreamControl             = 0x00
	StreamPush                = 0x01
	StreamQPACKEncoder        = 0x02
	StreamQPACKDecoder        = 0x03
	SettingQPACKTableCapacity = 0x01
	SettingMaxFieldSection    = 0x06
	SettingQPACKBlocked       = 0x07
)

// ReservedH2Frame says whether typ is one of HTTP/2's frame types that
// HTTP/3 reserves (RFC 9114 §7.2.8): receiving one is H3_FRAME_UNEXPECTED.
func ReservedH2Frame(typ uint64) bool {
	return typ == 0x02 || typ == 0x06 || typ == 0x08 || typ == 0x09
}

// ControlOnly says whether a frame of type typ belongs on the control
// stream only.
func ControlOnly(typ uint64) bool {
	switch typ {
	case FrameCancelPush, FrameSettings, FrameGoAway, FrameMaxPushID, FrameOrigin, FramePriorityUpdate, FramePriorityUpdatePush:
		return true
	}
	return false
}

// UnexpectedOnControl says whether a frame of type typ on a control
// stream is H3_FRAME_UNEXPECTED whenever it comes (RFC 9114 §7.2): a
// second SETTINGS is the reader's to catch.
func UnexpectedOnControl(typ uint64) bool {
	return typ == FrameData || typ == FrameHeaders || typ == FramePushPromise || ReservedH2Frame(typ)
}

// UnexpectedOnRequest says whether a frame of type typ that a client
// sends on a request stream is H3_FRAME_UNEXPECTED whenever it comes:
// DATA before HEADERS, or after trailers, is the reader's to catch.
func UnexpectedOnRequest(typ uint64) bool {
	return typ == FramePushPromise || ControlOnly(typ) || ReservedH2Frame(typ)
}

// AppendSettings appends a SETTINGS frame with settings in a fixed
// (sorted) order, so the same settings are the same octets.
func AppendSettings(dst []byte, settings map[uint64]uint64) []byte {
	var payload []byte
	for _, id := range slices.Sorted(maps.Keys(settings)) {
		payload = quicvarint.Append(payload, id)
		payload = quicvarint.Append(payload, settings[id])
	}
	dst = quicvarint.Append(dst, FrameSettings)
	dst = quicvarint.Append(dst, uint64(len(payload)))
	return append(dst, payload...)
}

// ParseSettings reads a SETTINGS frame's payload. A setting sent twice,
// one of HTTP/2's that HTTP/3 reserves, or a payload cut inside a pair
// is H3_SETTINGS_ERROR (RFC 9114 §7.2.4).
func ParseSettings(payload []byte) (map[uint64]uint64, error) {
	settings := map[uint64]uint64{}
	for len(payload) > 0 {
		id, n, err := quicvarint.Parse(payload)
		if err != nil {
			return nil, fmt.Errorf("a setting's identifier cut short")
		}
		payload = payload[n:]
		v, n, err := quicvarint.Parse(payload)
		if err != nil {
			return nil, fmt.Errorf("setting %#x has no value", id)
		}
		payload = payload[n:]
		if id >= 0x02 && id <= 0x05 {
			return nil, fmt.Errorf("setting %#x is HTTP/2's, reserved in HTTP/3", id)
		}
		if _, dup := settings[id]; dup {
			return nil, fmt.Errorf("setting %#x sent twice", id)
		}
		settings[id] = v
	}
	return settings, nil
}

package store

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Raw records (a DNS sample's JSON, a result's) are kept whole and
// compressed: zstd with a dictionary trained on doxlab's own records,
// since a record of 2 KB alone gives zstd too little to learn from (see
// docs/store.md for the figures). A stored record is a byte naming its
// codec, then the codec's bytes: a better dictionary later is a new codec
// beside this one, which stays readable.
const (
	codecPlain byte = 0 // the JSON as it is: a record zstd would not shrink
	codecZstd1 byte = 1 // zstd with dictionary 1 (rawdict/1.zdict)
	codecZstd2 byte = 2 // zstd with dictionary 2 (rawdict/2.zdict), DNS samples' in schemas 9 and 10
	codecBare2 byte = 3 // codec 2's frame bare (bare), DNS samples' since schema 11
	codecZstd  byte = 4 // zstd without a dictionary: sample blocks (schema 15)
	codecBare3 byte = 5 // zstd with dictionary 3 (rawdict/3.zdict), bare as codec 3: DNS samples' written after 0.1.0
	codecZstd3 byte = 6 // dictionary 3's frame whole, which packSample makes bare
)

// A zstd frame of dictionary 2 spends 10 octets on what a record's codec
// already says or the database already does: the magic number (4), the
// dictionary's ID (2) and a checksum of the content (4; a database keeps
// its pages whole, and a sample's columns have no checksum either).
// Codec 3 is that frame without them; unbare puts the first two back
// for the decoder (without the checksum, which it then does not look
// for). Bare frames are 2 % of a DNS sample's octets on PostgreSQL.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	dict2ID   = []byte{0x02, 0x80} // 32770, little-endian, as rawdict/2.zdict names itself
	dict3ID   = []byte{0x03, 0x80} // 32771, as rawdict/3.zdict names itself
)

// The frame header descriptor's fields bare touches (RFC 8878, 3.1.1.1.1).
const (
	fhdDictID   = 0x03 // the dictionary ID's size: 0, 1, 2 or 4 octets
	fhdChecksum = 0x04 // a 4-octet checksum ends the frame
	fhdSingle   = 0x20 // no window descriptor follows the descriptor
)

// bare is a codec-2 record (its codec byte first) as codec 3 keeps it,
// or nil if it is not a frame of the shape dictionary 2's encoder
// writes. The upgrade to schema 11 does the same in PostgreSQL's SQL
// (bareSQL); on SQLite it calls this.
func bare(z []byte) []byte { return bareOf(z, codecZstd2, dict2ID, codecBare2) }

// bareOf is z, a frame of the dictionary id behind the codec byte from,
// as the codec to keeps it (without its magic number, dictionary ID and
// checksum), or nil if it is not a frame of that shape.
func bareOf(z []byte, from byte, dictID []byte, to byte) []byte {
	if len(z) < 7 || z[0] != from || !bytes.Equal(z[1:5], zstdMagic) {
		return nil
	}
	fhd := z[5]
	head := 6 // codec, magic, descriptor
	if fhd&fhdSingle == 0 {
		head++
	}
	id := [4]int{0, 1, 2, 4}[fhd&fhdDictID]
	end := len(z)
	if fhd&fhdChecksum != 0 {
		end -= 4
	}
	if id != len(dictID) || head+id > end || !bytes.Equal(z[head:head+id], dictID) {
		return nil
	}
	out := make([]byte, 0, len(z)-10)
	out = append(out, to, fhd&^(fhdDictID|fhdChecksum))
	out = append(out, z[6:head]...) // the window descriptor, if any
	return append(out, z[head+id:end]...)
}

// unbared, set by a test, makes packSample write codec 2, as schemas 9
// and 10 did.
var unbared bool

// unbare is a bare record's frame (codec 3's or 5's, of the dictionary
// dictID) as the decoder reads it.
func unbare(b []byte, dictID []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errors.New("store: a bare record too short for a frame")
	}
	fhd := b[1]
	head := 2
	if fhd&fhdSingle == 0 {
		head++
	}
	if fhd&(fhdDictID|fhdChecksum) != 0 || head > len(b) {
		return nil, errors.New("store: a bare record whose frame is not bare")
	}
	out := make([]byte, 0, len(b)+5)
	out = append(out, zstdMagic...)
	out = append(out, fhd|2) // a 2-octet dictionary ID follows
	out = append(out, b[2:head]...)
	out = append(out, dictID...)
	return append(out, b[head:]...), nil
}

// dict1 is dictionary 1. It never changes: records written with it are
// read with it. A new dictionary is a new file and a new codec.
//
//go:embed rawdict/1.zdict
var dict1 []byte

// dict2 is dictionary 2, for DNS samples alone: trained by zstd's own
// trainer (COVER), whose dictionaries halve what klauspost's builder
// leaves over dictionary 1 on held-out samples (docs/store.md).
//
//go:embed rawdict/2.zdict
var dict2 []byte

// dict3 is dictionary 3, for DNS samples alone, trained as dictionary 2
// was on the samples doxlab writes now (their records grew since:
// warm-ups, wire times, kernel timestamps, connection facts), of the
// testbed and of loopback: held-out samples take 193-206 octets where
// dictionary 2 took 228-252 (docs/store.md). zstd's best level would
// save 12-14 more, at 1.6 ms a sample where this level takes 52 µs: a
// store written at ten thousand samples a second, or a test writing
// ten thousand, cannot spare that.
//
//go:embed rawdict/3.zdict
var dict3 []byte

// maxRecord bounds what one record may decompress to: a page load with
// its trace is some hundreds of KB; a corrupt or hostile store must not
// make a reader allocate gigabytes.
const maxRecord = 64 << 20

// zcodec is the dictionaries' encoders and a decoder for both (a frame
// names its dictionary), made once: all are safe for concurrent use.
type zcodec struct {
	enc  *zstd.Encoder // dictionary 1
	enc2 *zstd.Encoder // dictionary 2
	enc3 *zstd.Encoder // dictionary 3, no checksum (packSample bares its frames)
	dec  *zstd.Decoder
}

var zstdCodec = sync.OnceValues(func() (*zcodec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDict(dict1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("store: the records' dictionary: %w", err)
	}
	enc2, err := zstd.NewWriter(nil, zstd.WithEncoderDict(dict2), zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("store: the samples' dictionary: %w", err)
	}
	enc3, err := zstd.NewWriter(nil, zstd.WithEncoderDict(dict3), zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("store: the samples' dictionary 3: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDicts(dict1, dict2, dict3), zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecord))
	if err != nil {
		return nil, fmt.Errorf("store: the records' dictionaries: %w", err)
	}
	return &zcodec{enc, enc2, enc3, dec}, nil
})

// packRaw is a result's record as its column keeps it.
func packRaw(raw []byte) []byte { return pack(raw, codecZstd1) }

// packSample is a DNS sample's record as its column keeps it: with
// dictionary 3, bare.
func packSample(raw []byte) []byte {
	if unbared {
		return pack(raw, codecZstd2)
	}
	z := pack(raw, codecZstd3)
	if b := bareOf(z, codecZstd3, dict3ID, codecBare3); b != nil {
		return b
	}
	return z
}

func pack(raw []byte, codec byte) []byte {
	c, err := zstdCodec()
	if err == nil {
		enc := c.enc
		switch codec {
		case codecZstd2:
			enc = c.enc2
		case codecZstd3:
			enc = c.enc3
		}
		if out := enc.EncodeAll(raw, []byte{codec}); len(out) <= len(raw) {
			return out
		}
	}
	return append([]byte{codecPlain}, raw...)
}

// unpackRaw is the record packRaw packed.
func unpackRaw(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, errors.New("store: an empty raw record")
	}
	switch b[0] {
	case codecPlain:
		return b[1:], nil
	case codecZstd1, codecZstd2, codecBare2, codecZstd, codecBare3, codecZstd3:
		c, err := zstdCodec()
		if err != nil {
			return nil, err
		}
		frame := b[1:]
		switch b[0] {
		case codecBare2:
			frame, err = unbare(b, dict2ID)
		case codecBare3:
			frame, err = unbare(b, dict3ID)
		}
		if err != nil {
			return nil, err
		}
		out, err := c.dec.DecodeAll(frame, nil)
		if err != nil {
			return nil, fmt.Errorf("store: a compressed record: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("store: a raw record in codec %d, which this version does not know (a newer one wrote it)", b[0])
}

package store

import (
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
	codecZstd2 byte = 2 // zstd with dictionary 2 (rawdict/2.zdict), DNS samples' since schema 9
)

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

// maxRecord bounds what one record may decompress to: a page load with
// its trace is some hundreds of KB; a corrupt or hostile store must not
// make a reader allocate gigabytes.
const maxRecord = 64 << 20

// zcodec is the dictionaries' encoders and a decoder for both (a frame
// names its dictionary), made once: all are safe for concurrent use.
type zcodec struct {
	enc  *zstd.Encoder // dictionary 1
	enc2 *zstd.Encoder // dictionary 2
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
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDicts(dict1, dict2), zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecord))
	if err != nil {
		return nil, fmt.Errorf("store: the records' dictionaries: %w", err)
	}
	return &zcodec{enc, enc2, dec}, nil
})

// packRaw is a result's record as its column keeps it.
func packRaw(raw []byte) []byte { return pack(raw, codecZstd1) }

// packSample is a DNS sample's record as its column keeps it.
func packSample(raw []byte) []byte { return pack(raw, codecZstd2) }

func pack(raw []byte, codec byte) []byte {
	c, err := zstdCodec()
	if err == nil {
		enc := c.enc
		if codec == codecZstd2 {
			enc = c.enc2
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
	case codecZstd1, codecZstd2:
		c, err := zstdCodec()
		if err != nil {
			return nil, err
		}
		out, err := c.dec.DecodeAll(b[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("store: a compressed record: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("store: a raw record in codec %d, which this version does not know (a newer one wrote it)", b[0])
}

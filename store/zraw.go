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
)

// dict1 is dictionary 1. It never changes: records written with it are
// read with it. A new dictionary is a new file and a new codec.
//
//go:embed rawdict/1.zdict
var dict1 []byte

// maxRecord bounds what one record may decompress to: a page load with
// its trace is some hundreds of KB; a corrupt or hostile store must not
// make a reader allocate gigabytes.
const maxRecord = 64 << 20

// zcodec is dictionary 1's encoder and decoder, made once: both are safe
// for concurrent use.
type zcodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

var zstdCodec = sync.OnceValues(func() (*zcodec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDict(dict1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("store: the records' dictionary: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDicts(dict1), zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecord))
	if err != nil {
		return nil, fmt.Errorf("store: the records' dictionary: %w", err)
	}
	return &zcodec{enc, dec}, nil
})

// packRaw is a record as its column keeps it.
func packRaw(raw []byte) []byte {
	c, err := zstdCodec()
	if err == nil {
		if out := c.enc.EncodeAll(raw, []byte{codecZstd1}); len(out) <= len(raw) {
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
	case codecZstd1:
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

// Package pngtext pads a PNG file with a tEXt chunk, so that a generated
// image is exactly the size a corpus page needs while staying valid.
package pngtext

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// Overhead is what the chunk adds besides the text: its length, type,
// CRC and the "Comment" keyword with its NUL.
const Overhead = 12 + len(keyword)

const keyword = "Comment\x00"

// Pad inserts a tEXt chunk holding text before the IEND chunk of the
// encoded PNG b: the file grows by Overhead + len(text).
func Pad(b []byte, text []byte) []byte {
	const iend = 12 // length, type, CRC of the IEND chunk
	data := append([]byte(keyword), text...)
	var chunk bytes.Buffer
	binary.Write(&chunk, binary.BigEndian, uint32(len(data)))
	chunk.WriteString("tEXt")
	chunk.Write(data)
	binary.Write(&chunk, binary.BigEndian, crc32.ChecksumIEEE(append([]byte("tEXt"), data...)))
	out := append([]byte{}, b[:len(b)-iend]...)
	out = append(out, chunk.Bytes()...)
	return append(out, b[len(b)-iend:]...)
}

package store

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// TestPackedRecords: a record comes back as it went in; a DNS sample's
// JSON is kept in a fraction of its octets, in fewer with dictionary 2,
// fewer still with 3 and bare; a record too small to gain
// is kept as it is; an unknown codec, a corrupt frame and a frame that
// would decompress past maxRecord are refused with a reason.
func TestPackedRecords(t *testing.T) {
	sample := []byte(`{"url":"quic://192.0.2.53:853","target":"192.0.2.53","transport":"doq","condition":"0rtt","rep":3,"start":"2026-11-29T01:40:35.123456789Z",` +
		`"warmup":{"url":"quic://192.0.2.53:853","transport":"doq","qname":"test.com.","qtype":"A","status":"ok","rcode":"NOERROR","answers":["test.com.\t300\tIN\tA\t192.0.2.1"],` +
		`"timing":{"connect_ms":0,"handshake_ms":21.4,"query_ms":10.2,"total_ms":31.6},"conn":{"reused":false,"tls_resumed":false,"used_0rtt":false,"quic_version":"v1","alpn":"doq"}},` +
		`"measure":{"url":"quic://192.0.2.53:853","transport":"doq","qname":"test.com.","qtype":"A","status":"ok","rcode":"NOERROR","answers":["test.com.\t300\tIN\tA\t192.0.2.1"],` +
		`"timing":{"connect_ms":0,"handshake_ms":0.4,"query_ms":10.1,"total_ms":10.5},"conn":{"reused":false,"tls_resumed":true,"used_0rtt":true,"quic_version":"v1","alpn":"doq"},` +
		`"bytes":{"sent":1512,"received":2381},"packets":{"sent":4,"received":5}},"probe":{"rtt_ms":10.0},"status":"ok","attempts":1}`)
	z := packRaw(sample)
	require.Equal(t, codecZstd1, z[0])
	require.Less(t, len(z), len(sample)/2, "a sample's JSON in under half its octets")
	back, err := unpackRaw(z)
	require.NoError(t, err)
	require.Equal(t, sample, back)

	z2 := pack(sample, codecZstd2)
	require.Equal(t, codecZstd2, z2[0])
	require.Less(t, len(z2), len(z), "dictionary 2 keeps a sample in fewer octets than 1")
	back, err = unpackRaw(z2)
	require.NoError(t, err)
	require.Equal(t, sample, back)

	z3 := bare(z2)
	require.Equal(t, codecBare2, z3[0], "a codec-2 record made bare (the upgrade to schema 11)")
	require.Len(t, z3, len(z2)-10, "bare: no magic number, dictionary ID or checksum")
	back, err = unpackRaw(z3)
	require.NoError(t, err)
	require.Equal(t, sample, back)

	z5 := packSample(sample)
	require.Equal(t, codecBare3, z5[0], "a sample is kept with dictionary 3, bare")
	// A sample as doxlab writes it now (one of the dns-rtt experiment's
	// on the testbed, which dictionary 3 was not trained on).
	real, err := os.ReadFile("testdata/testbed-sample.json")
	require.NoError(t, err)
	real = bytes.TrimSpace(real)
	r2, r5 := bare(pack(real, codecZstd2)), packSample(real)
	require.Less(t, len(r5), len(r2)-16, "dictionary 3 keeps a sample of now in fewer octets than 2 (222 against 243)")
	back, err = unpackRaw(r5)
	require.NoError(t, err)
	require.Equal(t, real, back)
	require.Equal(t, z5, bareOf(pack(sample, codecZstd3), codecZstd3, dict3ID, codecBare3), "its frame, whole, made bare")
	back, err = unpackRaw(z5)
	require.NoError(t, err)
	require.Equal(t, sample, back)
	back, err = unpackRaw(pack(sample, codecZstd3))
	require.NoError(t, err)
	require.Equal(t, sample, back, "a frame of dictionary 3 kept whole reads too")
	require.Nil(t, bare(z5), "dictionary 3's frames are no codec-2 frames to bare")
	require.Nil(t, bareOf(z2, codecZstd3, dict3ID, codecBare3), "nor dictionary 2's codec-5 ones")
	big := bytes.Repeat(sample, 4000) // 4 MB: a frame with a window descriptor
	for _, z := range [][]byte{packSample(big), bare(pack(big, codecZstd2))} {
		back, err = unpackRaw(z)
		require.NoError(t, err)
		require.Equal(t, big, back, "codec %d", z[0])
	}
	_, err = unpackRaw([]byte{codecBare3, 0x66, 1, 2})
	require.ErrorContains(t, err, "not bare")
	wrong := slices.Clone(z5)
	wrong[0] = codecBare2 // dictionary 3's frame read with dictionary 2's ID
	_, err = unpackRaw(wrong)
	require.ErrorContains(t, err, "a compressed record")
	require.Nil(t, bare(z), "dictionary 1's frames stay as they are")
	require.Nil(t, bare([]byte{codecZstd2, 0x28, 0xb5}), "as does a frame cut short")
	_, err = unpackRaw([]byte{codecBare2})
	require.ErrorContains(t, err, "too short")
	_, err = unpackRaw([]byte{codecBare2, 0x66, 1, 2})
	require.ErrorContains(t, err, "not bare")
	_, err = unpackRaw([]byte{codecBare2, 0x60, 0x28, 0x28, 0x28})
	require.ErrorContains(t, err, "a compressed record")

	tiny := packRaw([]byte(`{}`))
	require.Equal(t, []byte{codecPlain, '{', '}'}, tiny, "kept as it is")
	back, err = unpackRaw(tiny)
	require.NoError(t, err)
	require.Equal(t, []byte(`{}`), back)

	_, err = unpackRaw([]byte{9, 1, 2})
	require.ErrorContains(t, err, "codec 9")
	_, err = unpackRaw(nil)
	require.ErrorContains(t, err, "empty")
	_, err = unpackRaw(append([]byte{codecZstd1}, bytes.Repeat([]byte{0x28}, 40)...))
	require.ErrorContains(t, err, "a compressed record")

	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDict(dict1))
	require.NoError(t, err)
	bomb := enc.EncodeAll(make([]byte, maxRecord+1), []byte{codecZstd1})
	_, err = unpackRaw(bomb)
	require.Error(t, err, "%d octets decompress past the bound", len(bomb))
}

// FuzzUnpackRaw: whatever octets a store holds as a raw record, they
// are refused or unpacked into at most maxRecord octets; and a record
// packed in any codec the writer uses unpacks to itself.
func FuzzUnpackRaw(f *testing.F) {
	sample := []byte(`{"url":"udp://192.0.2.53:53","transport":"udp","status":"ok","measure":{"rcode":"NOERROR","timing":{"total_ms":10.5}}}`)
	for _, z := range [][]byte{packRaw(sample), pack(sample, codecZstd2), bare(pack(sample, codecZstd2)), packSample(sample), {codecPlain}, {9, 1, 2}} {
		f.Add(z, []byte(nil))
	}
	f.Add([]byte(nil), sample)
	f.Fuzz(func(t *testing.T, z, raw []byte) {
		if out, err := unpackRaw(z); err == nil && len(out) > maxRecord {
			t.Fatalf("%d octets unpacked, past %d", len(out), maxRecord)
		}
		for _, p := range [][]byte{packRaw(raw), pack(raw, codecZstd2), pack(raw, codecZstd3), packSample(raw)} {
			back, err := unpackRaw(p)
			if err != nil || !bytes.Equal(back, raw) {
				t.Fatalf("codec %d: %q came back as %q (%v)", p[0], raw, back, err)
			}
		}
	})
}

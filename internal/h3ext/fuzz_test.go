package h3ext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOriginRoundTrip: what AppendOrigin writes, ReadFrame and
// ParseOrigin read back, normalized; bad entries are skipped, not fatal.
func TestOriginRoundTrip(t *testing.T) {
	b, err := AppendOrigin(nil, []string{"https://A.example", "https://b.example:443", "https://c.example:8443", "http://plain.example", "https://d.example/path", "junk"})
	require.NoError(t, err)
	typ, payload, err := ReadFrame(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, uint64(FrameOrigin), typ)
	got, err := ParseOrigin(payload)
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.example", "https://b.example", "https://c.example:8443"}, got)
	require.Equal(t, "https://c.example:8443", Origin("C.example", 8443))
	require.Equal(t, "https://[::1]", Origin("::1", 443))
	_, err = ParseOrigin([]byte{0, 5, 'a'})
	require.ErrorIs(t, err, ErrFrame)
}

// FuzzOriginStream is a client reading the control stream's frames
// after SETTINGS until it ends, ORIGIN ones parsed. Nothing may panic, errors
// are framing errors, and what is accepted re-encodes to a frame that
// parses to the same origins.
func FuzzOriginStream(f *testing.F) {
	good, _ := AppendOrigin(nil, []string{"https://wiki.doxlab.test", "https://insta.doxlab.test:8443"})
	f.Add(good)
	f.Add(append([]byte{0x21, 0}, good...)) // a reserved frame first
	f.Add([]byte{0x0c, 0x03, 0x00, 0x05, 'a'})
	f.Add([]byte{0x0c, 0x80, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			typ, payload, err := ReadFrame(r)
			if err != nil {
				if !errors.Is(err, ErrFrame) && !errors.Is(err, io.EOF) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(payload) > MaxFrame {
				t.Fatalf("read a %d-octet payload", len(payload))
			}
			if typ != FrameOrigin {
				continue
			}
			origins, err := ParseOrigin(payload)
			if err != nil && !errors.Is(err, ErrFrame) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			again, err2 := AppendOrigin(nil, origins)
			if err2 != nil {
				t.Fatal(err2)
			}
			_, p2, _ := ReadFrame(bytes.NewReader(again))
			back, _ := ParseOrigin(p2)
			if len(back) != len(origins) {
				t.Fatalf("origins %q re-parse as %q", origins, back)
			}
		}
	})
}

// TestH2Origin: RFC 8336's frame, a 9-octet header (length, type 0xc,
// no flags, stream 0) then the same entries as HTTP/3's; one that would
// not fit a default-size frame is refused.
func TestH2Origin(t *testing.T) {
	f, err := H2Origin([]string{"https://a.test", "https://b.test:8443"})
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 2 + 14 + 2 + 19, 0x0c, 0, 0, 0, 0, 0}, f[:9])
	got, err := ParseOrigin(f[9:])
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.test", "https://b.test:8443"}, got)
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("https://host%d.example.test", i)
	}
	_, err = H2Origin(many)
	require.ErrorContains(t, err, "over one HTTP/2 frame")
}

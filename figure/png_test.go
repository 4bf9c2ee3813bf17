package figure

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEncodePNG: what encodePNG writes decodes, with any PNG decoder's
// rules (chunk CRCs, zlib's checksum), to the pixels it was given: an
// opaque image as RGB in several IDAT chunks, a sub-image from its own
// origin, a translucent one through image/png with its alpha.
func TestEncodePNG(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	whole := image.NewRGBA(image.Rect(0, 0, 701, 403)) // an odd width: rows not a multiple of 4
	for i := range whole.Pix {
		whole.Pix[i] = byte(rng.IntN(256)) // noise: deflate cannot shrink it below several chunks
	}
	for i := 3; i < len(whole.Pix); i += 4 {
		whole.Pix[i] = 0xff
	}
	sub := whole.SubImage(image.Rect(13, 7, 500, 300)).(*image.RGBA)
	translucent := image.NewRGBA(image.Rect(0, 0, 20, 10))
	translucent.Set(3, 4, color.RGBA{40, 0, 0, 255}) // the rest transparent

	for name, m := range map[string]*image.RGBA{"opaque": whole, "sub-image": sub, "translucent": translucent} {
		var b bytes.Buffer
		require.NoError(t, encodePNG(&b, m), name)
		got, err := png.Decode(bytes.NewReader(b.Bytes()))
		require.NoError(t, err, name)
		require.Equal(t, m.Bounds().Size(), got.Bounds().Size(), name)
		for y := range m.Bounds().Dy() {
			for x := range m.Bounds().Dx() {
				want := m.At(m.Bounds().Min.X+x, m.Bounds().Min.Y+y)
				require.Equal(t, color.RGBAModel.Convert(want), color.RGBAModel.Convert(got.At(x, y)), "%s (%d, %d)", name, x, y)
			}
		}
		if m.Opaque() {
			require.Equal(t, byte(2), b.Bytes()[8+8+9], "%s: truecolour, no alpha", name)
		}
		if name == "opaque" {
			require.Greater(t, bytes.Count(b.Bytes(), []byte("IDAT")), 10, "IDAT split into 64 KiB chunks")
		}
	}
}

// TestEncodePNGWriteError: a writer's error is returned, not lost.
func TestEncodePNGWriteError(t *testing.T) {
	m := image.NewRGBA(image.Rect(0, 0, 300, 300))
	for i := range m.Pix {
		m.Pix[i] = 0xff
	}
	full := errors.New("disk full")
	require.ErrorIs(t, encodePNG(&failWriter{left: 100, err: full}, m), full)
}

// failWriter takes left octets, then fails with err.
type failWriter struct {
	left int
	err  error
}

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, w.err
	}
	w.left -= len(p)
	return len(p), nil
}

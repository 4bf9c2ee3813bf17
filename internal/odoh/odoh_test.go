package odoh_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/odoh"
)

// TestRoundTrip: a query sealed to a target's config opens there, and
// the answer sealed to it opens on the client, padding and all.
func TestRoundTrip(t *testing.T) {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	c, err := odoh.ParseConfigs(odoh.MarshalConfigs(kp.Config))
	require.NoError(t, err)
	require.Equal(t, kp.Config, c)
	query := []byte("\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01")
	sealed, q, err := odoh.Seal(c, query, 128)
	require.NoError(t, err)
	require.False(t, bytes.Contains(sealed, []byte("example")), "the name is sealed")
	got, rcv, err := kp.Open(sealed)
	require.NoError(t, err)
	require.Equal(t, query, got)
	answer := append(append([]byte{}, query...), 1, 2, 3)
	resp, err := rcv.Seal(answer, 468)
	require.NoError(t, err)
	opened, err := q.Open(resp)
	require.NoError(t, err)
	require.Equal(t, answer, opened)

	_, err = q.Open(append(resp[:len(resp)-1:len(resp)-1], resp[len(resp)-1]^1))
	require.ErrorContains(t, err, "does not open", "a changed answer")
	other, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	_, _, err = other.Open(sealed)
	require.ErrorIs(t, err, odoh.ErrUnknownKey)
	_, _, err = kp.Open(resp)
	require.ErrorContains(t, err, "message type")
	_, _, err = kp.Open([]byte{1, 0})
	require.ErrorContains(t, err, "malformed")
}

// TestKeyFromSeed: one seed, one config and key_id (restarts keep them).
func TestKeyFromSeed(t *testing.T) {
	seed := bytes.Repeat([]byte{3}, 32)
	a, err := odoh.NewKeyPair(seed)
	require.NoError(t, err)
	b, err := odoh.NewKeyPair(seed)
	require.NoError(t, err)
	require.Equal(t, a.Config.KeyID(), b.Config.KeyID())
	require.Len(t, a.Config.KeyID(), 32)
}

// TestParseConfigs skips configs of other versions and suites, and
// refuses malformed lists.
func TestParseConfigs(t *testing.T) {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	good := odoh.MarshalConfigs(kp.Config)
	p256 := kp.Config
	p256.KEM = 0x0010
	c, err := odoh.ParseConfigs(odoh.MarshalConfigs(p256, kp.Config))
	require.NoError(t, err)
	require.Equal(t, kp.Config, c, "the first supported one")
	_, err = odoh.ParseConfigs(odoh.MarshalConfigs(p256))
	require.ErrorContains(t, err, "no config")
	for name, bad := range map[string][]byte{"empty": {}, "truncated": good[:len(good)-1], "trailing": append(append([]byte{}, good...), 0)} {
		_, err := odoh.ParseConfigs(bad)
		require.Error(t, err, name)
	}
}

// TestRFC9230Vectors: the test vectors of RFC 9230's Appendix A. The
// seed derives the target's key, its ObliviousDoHConfigs and key_id;
// the oblivious query opens to the query; the answer sealed with the
// vector's response nonce is the vector's oblivious response, octet for
// octet; and the client's side opens that response (with its own
// sealing, whose ephemeral key is random, checked by TestRoundTrip).
func TestRFC9230Vectors(t *testing.T) {
	h := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	seed := h("c9d84d04e6369fccb8a4d5a264001491221f1b97d9b80dd32c35834bb4462383")
	configs := h("002c000100280020000100010020c6a793bedbd601c25970b1cc46bea80fdb1a8ec51540d79e4f9f17b8baa9da33")
	keyID := h("9265d14d640ff991b31892f36326ab601ea84d61964fc7a9c7f981a5313e58b9")
	query := h("9db1072b0ab473d1e4b74b09637d5f8f253ad4047426ab4dfcc58350bb67b60c")
	answer := h("9db1072b0ab473d1e4b74b09637d5f8f253ad4047426ab4dfcc58350bb67b60c9db1072b0ab473d1e4b74b09637d5f8f253ad4047426ab4dfcc58350bb67b60c")
	obliviousQuery := h("0100209265d14d640ff991b31892f36326ab601ea84d61964fc7a9c7f981a5313e58b90054655d2fa2b2271e40b5a78745e41e6d6c5c181fd1fcffcc30fc451d5ec7fdcc5a6ae0da1cba2bd379da93d02d0e42a3849ec6ba53a54c7c8216f0d3cc2cef30ac54f824f5d8b57657d8c7b95e2c0276580b3851d9")
	obliviousResponse := h("0200100f474d14998a841b15f84388a8af1881005413556bcd8d86194fb47a51982b715b7f253f4f3ea14d89a5dd9d2b67e6c13b0b7eb7ae740c09d915ef77461956ba8acac5c5f1d8965ca0888b1c0aa2a0084b4c2c375b74e1c3d4e51ad3fe8080b7941fd5719df5")

	kp, err := odoh.NewKeyPair(seed)
	require.NoError(t, err)
	require.Equal(t, configs, odoh.MarshalConfigs(kp.Config))
	require.Equal(t, keyID, kp.Config.KeyID())
	c, err := odoh.ParseConfigs(configs)
	require.NoError(t, err)
	require.Equal(t, kp.Config, c)

	got, rcv, err := kp.Open(obliviousQuery)
	require.NoError(t, err)
	require.Equal(t, query, got)
	sealed, err := rcv.SealWith(answer, 0, obliviousResponse[3:19])
	require.NoError(t, err)
	require.Equal(t, obliviousResponse, sealed)
}

// FuzzOpen: what a hostile client sends a target (a query), and what a
// hostile target or proxy sends back (an answer, its configs), is
// opened or refused with an error, never a panic; a query opens only
// to the DNS message sealed, an answer only to the one its target
// sealed. The seeds are a real exchange's.
func FuzzOpen(f *testing.F) {
	kp, err := odoh.NewKeyPair(bytes.Repeat([]byte{7}, 32))
	require.NoError(f, err)
	query := []byte("\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01")
	sealed, q, err := odoh.Seal(kp.Config, query, 128)
	require.NoError(f, err)
	_, rcv, err := kp.Open(sealed)
	require.NoError(f, err)
	resp, err := rcv.Seal(query, 0)
	require.NoError(f, err)
	f.Add(sealed)
	f.Add(resp)
	f.Add(odoh.MarshalConfigs(kp.Config))
	f.Add(odoh.MarshalConfigs(odoh.Config{KEM: 0x20, KDF: 1, AEAD: 1, PublicKey: make([]byte, 32)}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if msg, _, err := kp.Open(raw); err == nil && !bytes.Equal(raw, sealed) && len(msg) == 0 {
			t.Fatalf("a query opened to an empty message")
		}
		if msg, err := q.Open(raw); err == nil && !bytes.Equal(msg, query) {
			t.Fatalf("an answer that is not the target's opened: %x", msg)
		}
		if c, err := odoh.ParseConfigs(raw); err == nil {
			_, _, _ = odoh.Seal(c, query, 0) // a low-order key is an error
		}
	})
}

// TestSealTooLarge: a DNS message may be 65,535 octets, more than an
// ObliviousDoHMessage seals (its ciphertext's length is 16 bits): a
// target asked to seal such an answer, or a client such a query, gets
// an error naming the size, not a panic; padding is cut to what fits,
// and the largest message that fits opens whole.
func TestSealTooLarge(t *testing.T) {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	query := []byte("\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01")
	sealed, q, err := odoh.Seal(kp.Config, query, 0)
	require.NoError(t, err)
	_, rcv, err := kp.Open(sealed)
	require.NoError(t, err)

	for _, size := range []int{65_516, 65_535} {
		_, err = rcv.Seal(make([]byte, size), 0)
		require.ErrorContains(t, err, "does not fit", "an answer of %d octets", size)
		_, _, err = odoh.Seal(kp.Config, make([]byte, size), 0)
		require.ErrorContains(t, err, "does not fit", "a query of %d octets", size)
	}
	// The largest answer that fits, padded to 468: the padding is cut.
	answer := bytes.Repeat([]byte{7}, 65_515)
	resp, err := rcv.Seal(answer, 468)
	require.NoError(t, err)
	require.LessOrEqual(t, len(resp), 1+2+16+2+65_535)
	got, err := q.Open(resp)
	require.NoError(t, err)
	require.Equal(t, answer, got)
	// The largest query that fits opens at the target.
	big := bytes.Repeat([]byte{9}, 65_535-32-16-4)
	sealed, _, err = odoh.Seal(kp.Config, big, 128)
	require.NoError(t, err)
	got, _, err = kp.Open(sealed)
	require.NoError(t, err)
	require.Equal(t, big, got)
}

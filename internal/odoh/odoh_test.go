package odoh_test

import (
	"bytes"
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

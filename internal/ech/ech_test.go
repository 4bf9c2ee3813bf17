package ech_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/ech"
)

// TestKeyFromSeed: one seed makes one config (a restart publishes the
// same), which parses back to its public name, ID and KEM.
func TestKeyFromSeed(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	a, err := ech.NewKey("public.test", seed)
	require.NoError(t, err)
	b, err := ech.NewKey("public.test", seed)
	require.NoError(t, err)
	require.Equal(t, a.Config, b.Config)
	got, err := ech.Parse(ech.ConfigList(a.Config))
	require.NoError(t, err)
	require.Equal(t, []ech.Config{{Version: ech.Version, ID: a.ID, KEM: 0x0020, PublicName: "public.test"}}, got)

	_, err = ech.NewKey("", nil)
	require.ErrorContains(t, err, "public name")
	_, err = ech.NewKey("p.test", []byte{1})
	require.ErrorContains(t, err, "seed")
}

// TestParse reads lists with a config of an unknown version (listed by
// version, as clients skip it) and refuses malformed ones.
func TestParse(t *testing.T) {
	k, err := ech.NewKey("p.test", nil)
	require.NoError(t, err)
	unknown := []byte{0xfe, 0x0a, 0x00, 0x02, 0xaa, 0xbb}
	got, err := ech.Parse(ech.ConfigList(unknown, k.Config))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, uint16(0xfe0a), got[0].Version)
	require.Equal(t, "p.test", got[1].PublicName)

	list := ech.ConfigList(k.Config)
	for name, bad := range map[string][]byte{
		"empty":     {},
		"no config": {0, 0},
		"truncated": list[:len(list)-3],
		"trailing":  append(append([]byte{}, list...), 0),
		"short":     ech.ConfigList([]byte{0xfe, 0x0d, 0x00, 0x01, 0x01}),
	} {
		_, err := ech.Parse(bad)
		require.Error(t, err, name)
	}
}

// TestRotate: each rotation makes a config of a new ID; the set offers
// crypto/tls the current key as retry config and the previous one for
// clients that still hold it, and forgets the one before.
func TestRotate(t *testing.T) {
	ks, err := ech.NewKeys("p.test", nil)
	require.NoError(t, err)
	first := ks.Current()
	require.Len(t, ks.TLS(), 1)
	require.NoError(t, ks.Rotate())
	second := ks.Current()
	require.NotEqual(t, first.ID, second.ID)
	keys := ks.TLS()
	require.Len(t, keys, 2)
	require.True(t, keys[0].SendAsRetry)
	require.Equal(t, second.Config, keys[0].Config)
	require.False(t, keys[1].SendAsRetry)
	require.Equal(t, first.Config, keys[1].Config)
	require.NoError(t, ks.Rotate())
	for _, k := range ks.TLS() {
		require.NotEqual(t, first.Config, k.Config, "two rotations ago is gone")
	}
	require.Equal(t, ech.ConfigList(ks.Current().Config), ks.ConfigList())
}

// TestParseADeployedConfig reads the ECHConfigList tls-ech.dev publishes
// in its HTTPS record (also in the server's tests): one config of RFC
// 9849's version, X25519, under the public name its outer ClientHello
// carries.
func TestParseADeployedConfig(t *testing.T) {
	list, err := base64.StdEncoding.DecodeString("AEn+DQBFKwAgACABWIHUGj4u+PIggYXcR5JF0gYk3dCRioBW8uJq9H4mKAAIAAEAAQABAANAEnB1YmxpYy50bHMtZWNoLmRldgAA")
	require.NoError(t, err)
	got, err := ech.Parse(list)
	require.NoError(t, err)
	require.Equal(t, []ech.Config{{Version: ech.Version, ID: 0x2b, KEM: 0x0020, PublicName: "public.tls-ech.dev"}}, got)
}

// TestPublicNameIsAHostName: a config whose public name is not a host
// name (control characters a terminal would act on, an address, a
// label too long or hyphenated at an end) is ignored, as RFC 9849 §4
// has clients do; its neighbours are read.
func TestPublicNameIsAHostName(t *testing.T) {
	good, err := ech.NewKey("cover.example.", nil)
	require.NoError(t, err)
	for _, name := range []string{"p.test\x1b]0;owned\x07", "192.0.2.1", "x.0x7f", "-a.test", "a-.test", "a..test", strings.Repeat("a", 64) + ".test", "a b.test", "é.test", "."} {
		k, err := ech.NewKey("placeholder", nil)
		require.NoError(t, err)
		// The public name is the config's last field but its extensions'
		// length: swap it in, its length octet before it.
		c := bytes.Replace(k.Config, append([]byte{byte(len("placeholder"))}, "placeholder"...), append([]byte{byte(len(name))}, name...), 1)
		c[2], c[3] = byte((len(c)-4)>>8), byte(len(c)-4) // the config's length
		got, err := ech.Parse(ech.ConfigList(c, good.Config))
		require.NoError(t, err, "%q", name)
		require.Len(t, got, 1, "%q is ignored", name)
		require.Equal(t, "cover.example.", got[0].PublicName)
	}
	for _, name := range []string{"a.test", "x-1.example", "1.2.3.example", "0xdoc.test", "A.TEST"} {
		k, err := ech.NewKey(name, nil)
		require.NoError(t, err)
		got, err := ech.Parse(ech.ConfigList(k.Config))
		require.NoError(t, err)
		require.Equal(t, name, got[0].PublicName)
	}
}

// FuzzParse: any ECHConfigList (a hostile resolver's or page's HTTPS
// record) is read or refused, and each config read of the version this
// package knows has a host name for its public name.
func FuzzParse(f *testing.F) {
	k, err := ech.NewKey("p.test", nil)
	require.NoError(f, err)
	f.Add(ech.ConfigList(k.Config))
	f.Add(ech.ConfigList([]byte{0xfe, 0x0a, 0x00, 0x02, 0xaa, 0xbb}, k.Config))
	f.Fuzz(func(t *testing.T, list []byte) {
		cs, err := ech.Parse(list)
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.Version == ech.Version && (c.PublicName == "" || strings.ContainsFunc(c.PublicName, func(r rune) bool { return r < '-' || r > 'z' })) {
				t.Fatalf("a public name that is no host name: %q", c.PublicName)
			}
		}
	})
}

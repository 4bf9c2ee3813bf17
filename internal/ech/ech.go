// Package ech makes and reads Encrypted Client Hello configurations
// (RFC 9849 §4): a server's keys, the ECHConfigList its HTTPS records
// publish (RFC 9848's ech= parameter), and their rotation. crypto/tls
// does the handshake; what it leaves to its users is making the config
// it must be given "byte-for-byte", which is done here.
package ech

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/miekg/dns"
	"golang.org/x/crypto/cryptobyte"
)

// Version is the ECHConfig version of RFC 9849 (the extension's code point).
const Version = 0xfe0d

// The HPKE suite doxlab offers: DHKEM(X25519, HKDF-SHA256) with
// HKDF-SHA256 and AES-128-GCM or ChaCha20-Poly1305, the suites browsers
// and Cloudflare use.
const (
	kemX25519   = 0x0020
	kdfSHA256   = 0x0001
	aeadAES128  = 0x0001
	aeadChaCha  = 0x0003
	maxNameLen  = 64 // names up to this long are padded alike (§6.1.3)
	seedOctets  = 32
	publicOctet = 32
)

// What a connection's ECH came to, as server records and client samples
// label it; none offered is the empty string.
const (
	Accepted = "accepted" // the server opened the inner ClientHello
	// Rejected: offered with a config no key of the server's opens; the
	// server sent its retry configs and the client aborted (ech_required).
	Rejected = "rejected"
	// Retried (clients only): rejected, then accepted on a new connection
	// with the retry configs, a round trip and a handshake later.
	Retried = "retried"
	// GREASE: an ECH extension no key opens, and the handshake went on
	// under the outer name (RFC 9849 §6.2), as a browser without a config
	// sends.
	GREASE = "grease"
)

// Key is one ECH key: the marshalled ECHConfig and its HPKE private key.
type Key struct {
	ID         uint8
	PublicName string
	Config     []byte // one ECHConfig, as the ConfigList carries it
	private    []byte
}

// NewKey derives a key from a 32-octet seed (random when nil), for
// clients to use under publicName, the name the outer ClientHello
// carries. The config ID is the first octet of the public key's
// SHA-256, so a restart from the same seed publishes the same config.
func NewKey(publicName string, seed []byte) (*Key, error) {
	if publicName == "" || len(publicName) > 255 {
		return nil, fmt.Errorf("ech: public name %q: want 1-255 octets", publicName)
	}
	if seed == nil {
		seed = make([]byte, seedOctets)
		rand.Read(seed)
	}
	if len(seed) < seedOctets {
		return nil, fmt.Errorf("ech: seed of %d octets, want %d", len(seed), seedOctets)
	}
	sk, err := hpke.DHKEM(ecdh.X25519()).DeriveKeyPair(seed[:seedOctets])
	if err != nil {
		return nil, fmt.Errorf("ech: %w", err)
	}
	priv, err := sk.Bytes()
	if err != nil {
		return nil, fmt.Errorf("ech: %w", err)
	}
	pub := sk.PublicKey().Bytes()
	sum := sha256.Sum256(pub)
	k := &Key{ID: sum[0], PublicName: publicName, private: priv}
	var b cryptobyte.Builder
	b.AddUint16(Version)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8(k.ID)
		b.AddUint16(kemX25519)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(pub) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, aead := range []uint16{aeadAES128, aeadChaCha} {
				b.AddUint16(kdfSHA256)
				b.AddUint16(aead)
			}
		})
		b.AddUint8(maxNameLen)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(publicName)) })
		b.AddUint16(0) // no extensions
	})
	if k.Config, err = b.Bytes(); err != nil {
		return nil, fmt.Errorf("ech: %w", err)
	}
	return k, nil
}

// ConfigList is the ECHConfigList of the given configs, in order of
// preference: what ech= in an HTTPS record holds.
func ConfigList(configs ...[]byte) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range configs {
			b.AddBytes(c)
		}
	})
	return b.BytesOrPanic()
}

// Config is what a client learns from one ECHConfig of a list.
type Config struct {
	Version    uint16 `json:"version"`
	ID         uint8  `json:"config_id"`
	KEM        uint16 `json:"kem_id"`
	PublicName string `json:"public_name,omitempty"`
}

// Parse reads an ECHConfigList; configs of versions it does not know
// are listed by version alone, as clients skip them, and a config whose
// public name is no host name is left out, as RFC 9849 §4 has clients
// ignore it (the name a measured resolver or a page's HTTPS record
// gives reaches reports and terminals).
func Parse(list []byte) ([]Config, error) {
	s := cryptobyte.String(list)
	var configs cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&configs) || !s.Empty() || configs.Empty() {
		return nil, errors.New("ech: malformed ECHConfigList")
	}
	var out []Config
	for !configs.Empty() {
		var c Config
		var body cryptobyte.String
		if !configs.ReadUint16(&c.Version) || !configs.ReadUint16LengthPrefixed(&body) {
			return nil, errors.New("ech: truncated ECHConfig")
		}
		if c.Version == Version {
			var pub, suites, name cryptobyte.String
			var maxLen uint8
			if !body.ReadUint8(&c.ID) || !body.ReadUint16(&c.KEM) || !body.ReadUint16LengthPrefixed(&pub) ||
				!body.ReadUint16LengthPrefixed(&suites) || !body.ReadUint8(&maxLen) || !body.ReadUint8LengthPrefixed(&name) || name.Empty() {
				return nil, errors.New("ech: malformed ECHConfig")
			}
			if !HostName(string(name)) {
				continue
			}
			c.PublicName = string(name)
		}
		out = append(out, c)
	}
	return out, nil
}

// HostName says whether name is a host name in preferred name syntax
// (letters, digits and inner hyphens; labels of 1 to 63 octets; an
// optional final dot), its last label not a number, decimal or hex, as
// RFC 9849 §4 asks of a public name (an IPv4 address reads as one).
func HostName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := strings.ToLower(labels[len(labels)-1])
	number := strings.Trim(last, "0123456789") == "" ||
		strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "" // as WHATWG's URL parser reads IPv4
	return !number
}

// Keys is a server's ECH keys: the current one, which clients are sent
// in HTTPS records and retry configs, and the one before it, still
// accepted until the next rotation so that answers cached for up to one
// rotation period keep working. A config older than that is rejected
// and the client retries with the current one (§6.1.6).
type Keys struct {
	publicName string
	mu         sync.Mutex
	cur, prev  *Key
}

// NewKeys starts a key set from seed (random when nil).
func NewKeys(publicName string, seed []byte) (*Keys, error) {
	k, err := NewKey(publicName, seed)
	if err != nil {
		return nil, err
	}
	return &Keys{publicName: publicName, cur: k}, nil
}

// PublicName is the name the outer ClientHello carries.
func (ks *Keys) PublicName() string { return ks.publicName }

// Rotate makes a new current key; the current one becomes the previous,
// and the previous is forgotten.
func (ks *Keys) Rotate() error {
	k, err := NewKey(ks.publicName, nil)
	if err != nil {
		return err
	}
	for k.ID == ks.Current().ID { // a client tells configs apart by ID
		if k, err = NewKey(ks.publicName, nil); err != nil {
			return err
		}
	}
	ks.mu.Lock()
	ks.prev, ks.cur = ks.cur, k
	ks.mu.Unlock()
	return nil
}

// Current is the key clients are told about.
func (ks *Keys) Current() *Key {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.cur
}

// ConfigList is the current config as an ECHConfigList.
func (ks *Keys) ConfigList() []byte { return ConfigList(ks.Current().Config) }

// TLS are the keys for crypto/tls: the current one, also sent as the
// retry config, and the previous one, accepted but not advertised.
func (ks *Keys) TLS() []tls.EncryptedClientHelloKey {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	keys := []tls.EncryptedClientHelloKey{{Config: ks.cur.Config, PrivateKey: ks.cur.private, SendAsRetry: true}}
	if ks.prev != nil {
		keys = append(keys, tls.EncryptedClientHelloKey{Config: ks.prev.Config, PrivateKey: ks.prev.private})
	}
	return keys
}

// InAnswer is the ECHConfigList (ech=) of the first HTTPS record of an
// answer that has one, nil when none does.
func InAnswer(answer []dns.RR) []byte {
	for _, rr := range answer {
		if h, ok := rr.(*dns.HTTPS); ok {
			for _, kv := range h.Value {
				if e, ok := kv.(*dns.SVCBECHConfig); ok {
					return e.ECH
				}
			}
		}
	}
	return nil
}

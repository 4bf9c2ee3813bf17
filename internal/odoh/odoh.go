// Package odoh is Oblivious DNS over HTTPS's message layer (RFC 9230):
// a target's key configs, the client's sealing of a query to the target
// and opening of its answer, and the target's side of both. The HTTP
// around it (the proxy, the target's endpoint) is the server's and the
// transport's; HPKE is Go's crypto/hpke.
package odoh

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/miekg/dns"
	"golang.org/x/crypto/cryptobyte"
)

// ContentType is the media type of ODoH messages, both ways (§7).
const ContentType = "application/oblivious-dns-message"

// ConfigsPath is where a target publishes its configs (§6.1).
const ConfigsPath = "/.well-known/odohconfigs"

// SvcParamKey is the SvcParamKey a target's ObliviousDoHConfigs ride
// under in its HTTPS record: the ODoH drafts' "odohconfig"
// (draft-pauly-dprive-oblivious-doh), which odoh.cloudflare-dns.com's
// HTTPS record carried and Cloudflare's and Firefox's ODoH clients read.
// RFC 9230 publishes configs at ConfigsPath only and IANA registered no
// key for them (RFC 9540's ohttp is Oblivious HTTP's), so a record with
// it says what deployments did, not what the RFC asks.
const SvcParamKey = dns.SVCBKey(32769)

// Param is configs (MarshalConfigs) as an HTTPS record's SvcParam.
func Param(configs []byte) dns.SVCBKeyValue {
	return &dns.SVCBLocal{KeyCode: SvcParamKey, Data: configs}
}

// InAnswer is the ObliviousDoHConfigs of the first HTTPS or SVCB record
// of an answer that carries SvcParamKey, nil when none does.
func InAnswer(answer []dns.RR) []byte {
	for _, rr := range answer {
		var kvs []dns.SVCBKeyValue
		switch r := rr.(type) {
		case *dns.HTTPS:
			kvs = r.Value
		case *dns.SVCB:
			kvs = r.Value
		}
		for _, kv := range kvs {
			if l, ok := kv.(*dns.SVCBLocal); ok && l.KeyCode == SvcParamKey {
				return l.Data
			}
		}
	}
	return nil
}

// Version is the ObliviousDoHConfig version of RFC 9230.
const Version = 0x0001

// The one suite RFC 9230 targets deploy: DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256, AES-128-GCM.
const (
	kemX25519  = 0x0020
	kdfSHA256  = 0x0001
	aeadAES128 = 0x0001
	nk         = 16 // AES-128-GCM's key
	nn         = 12 // and nonce
	nonceLen   = 16 // max(Nn, Nk)
)

const (
	typeQuery    = 0x01
	typeResponse = 0x02
)

// ErrUnknownKey is a query sealed to a key the target does not hold
// (answered 401, §7).
var ErrUnknownKey = errors.New("odoh: the query's key_id is not the target's")

// Config is one ObliviousDoHConfigContents: a target's public key and
// suite.
type Config struct {
	KEM, KDF, AEAD uint16
	PublicKey      []byte
}

// contents is the config's wire form, which its key_id is derived from.
func (c Config) contents() []byte {
	var b cryptobyte.Builder
	b.AddUint16(c.KEM)
	b.AddUint16(c.KDF)
	b.AddUint16(c.AEAD)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c.PublicKey) })
	return b.BytesOrPanic()
}

// KeyID is Expand(Extract("", contents), "odoh key id", Nh) (§6.2).
func (c Config) KeyID() []byte {
	prk, _ := hkdf.Extract(sha256.New, c.contents(), nil)
	id, _ := hkdf.Expand(sha256.New, prk, "odoh key id", sha256.Size)
	return id
}

// supported says whether the client can use the config.
func (c Config) supported() bool {
	return c.KEM == kemX25519 && c.KDF == kdfSHA256 && c.AEAD == aeadAES128 && len(c.PublicKey) == 32
}

// MarshalConfigs is the ObliviousDoHConfigs a target publishes.
func MarshalConfigs(cs ...Config) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range cs {
			b.AddUint16(Version)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c.contents()) })
		}
	})
	return b.BytesOrPanic()
}

// ParseConfigs reads an ObliviousDoHConfigs and returns the first config
// of version 1 with the suite this package speaks; others are skipped,
// as §6.1 has clients do.
func ParseConfigs(raw []byte) (Config, error) {
	s := cryptobyte.String(raw)
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) || !s.Empty() {
		return Config{}, errors.New("odoh: malformed ObliviousDoHConfigs")
	}
	for !list.Empty() {
		var version uint16
		var body cryptobyte.String
		if !list.ReadUint16(&version) || !list.ReadUint16LengthPrefixed(&body) {
			return Config{}, errors.New("odoh: truncated ObliviousDoHConfig")
		}
		if version != Version {
			continue
		}
		var c Config
		var pk cryptobyte.String
		if !body.ReadUint16(&c.KEM) || !body.ReadUint16(&c.KDF) || !body.ReadUint16(&c.AEAD) ||
			!body.ReadUint16LengthPrefixed(&pk) || !body.Empty() {
			return Config{}, errors.New("odoh: malformed ObliviousDoHConfigContents")
		}
		c.PublicKey = pk
		if c.supported() {
			return c, nil
		}
	}
	return Config{}, errors.New("odoh: no config of version 1 with X25519, HKDF-SHA256 and AES-128-GCM")
}

// KeyPair is a target's key.
type KeyPair struct {
	Config Config
	keyID  []byte
	sk     hpke.PrivateKey
}

// NewKeyPair derives a target's key from a 32-octet seed (random when nil).
func NewKeyPair(seed []byte) (*KeyPair, error) {
	if seed == nil {
		seed = make([]byte, 32)
		rand.Read(seed)
	}
	sk, err := hpke.DHKEM(ecdh.X25519()).DeriveKeyPair(seed)
	if err != nil {
		return nil, fmt.Errorf("odoh: %w", err)
	}
	c := Config{KEM: kemX25519, KDF: kdfSHA256, AEAD: aeadAES128, PublicKey: sk.PublicKey().Bytes()}
	return &KeyPair{Config: c, keyID: c.KeyID(), sk: sk}, nil
}

// plaintext is ObliviousDoHMessagePlaintext: the DNS message and padding.
func plaintext(msg []byte, pad int) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(msg) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, pad)) })
	return b.BytesOrPanic()
}

// maxSealed is the most an ObliviousDoHMessage's encrypted_message
// holds: its length is 16 bits. tagLen is AES-128-GCM's tag.
const (
	maxSealed = 1<<16 - 1
	tagLen    = 16
)

// padded is msg's plaintext, padded to a multiple of pad octets (0:
// none), where it fits an encrypted_message with prefix octets before
// it (the query's encapsulated key). A DNS message over TCP or DoH may
// be 65,535 octets, more than a message can seal: that is an error, not
// a message cut short. Padding that would not fit is cut to what does:
// the size of a 64 KiB answer says little.
func padded(msg []byte, pad, prefix int) ([]byte, error) {
	room := maxSealed - prefix - tagLen - 4 // the plaintext's two lengths
	if len(msg) > room {
		return nil, fmt.Errorf("odoh: a DNS message of %d octets does not fit an ObliviousDoHMessage (%d at most)", len(msg), room)
	}
	n := 0
	if pad > 0 && len(msg)%pad != 0 {
		n = min(pad-len(msg)%pad, room-len(msg))
	}
	return plaintext(msg, n), nil
}

// parsePlaintext returns the DNS message of a plaintext whose padding is
// all zeros (§6.2: anything else is an error).
func parsePlaintext(p []byte) ([]byte, error) {
	s := cryptobyte.String(p)
	var msg, pad cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&msg) || !s.ReadUint16LengthPrefixed(&pad) || !s.Empty() || msg.Empty() {
		return nil, errors.New("odoh: malformed plaintext")
	}
	for _, b := range pad {
		if b != 0 {
			return nil, errors.New("odoh: non-zero padding")
		}
	}
	return msg, nil
}

// message is ObliviousDoHMessage.
func message(typ byte, keyID, ct []byte) []byte {
	var b cryptobyte.Builder
	b.AddUint8(typ)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(keyID) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(ct) })
	return b.BytesOrPanic()
}

func parseMessage(raw []byte, want byte) (keyID, ct []byte, err error) {
	s := cryptobyte.String(raw)
	var typ uint8
	var id, body cryptobyte.String
	if !s.ReadUint8(&typ) || !s.ReadUint16LengthPrefixed(&id) || !s.ReadUint16LengthPrefixed(&body) || !s.Empty() {
		return nil, nil, errors.New("odoh: malformed message")
	}
	if typ != want {
		return nil, nil, fmt.Errorf("odoh: message type %d, want %d", typ, want)
	}
	return id, body, nil
}

// aad is the associated data of a message: its type, then its key_id
// (the query's) or response nonce (the answer's), length-prefixed.
func aad(typ byte, id []byte) []byte {
	var b cryptobyte.Builder
	b.AddUint8(typ)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(id) })
	return b.BytesOrPanic()
}

// Query is a sealed query's state on the client, to open its answer.
type Query struct {
	plain  []byte
	secret []byte // Export("odoh response", Nk)
}

// Seal seals a DNS query (wire form) to the target's config, padded to
// a multiple of pad octets (0: none). It returns the message to POST.
func Seal(c Config, dnsQuery []byte, pad int) ([]byte, *Query, error) {
	if !c.supported() {
		return nil, nil, errors.New("odoh: unsupported config")
	}
	pk, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(c.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("odoh: %w", err)
	}
	enc, sender, err := hpke.NewSender(pk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte("odoh query"))
	if err != nil {
		return nil, nil, fmt.Errorf("odoh: %w", err)
	}
	plain, err := padded(dnsQuery, pad, len(enc))
	if err != nil {
		return nil, nil, err
	}
	keyID := c.KeyID()
	ct, err := sender.Seal(aad(typeQuery, keyID), plain)
	if err != nil {
		return nil, nil, fmt.Errorf("odoh: %w", err)
	}
	secret, err := sender.Export("odoh response", nk)
	if err != nil {
		return nil, nil, fmt.Errorf("odoh: %w", err)
	}
	return message(typeQuery, keyID, append(enc, ct...)), &Query{plain: plain, secret: secret}, nil
}

// responseKeys derives the answer's AEAD key and nonce (§6.4).
func responseKeys(secret, plain, nonce []byte) (key, iv []byte, err error) {
	var salt cryptobyte.Builder
	salt.AddBytes(plain)
	salt.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(nonce) })
	prk, err := hkdf.Extract(sha256.New, secret, salt.BytesOrPanic())
	if err != nil {
		return nil, nil, err
	}
	if key, err = hkdf.Expand(sha256.New, prk, "odoh key", nk); err != nil {
		return nil, nil, err
	}
	iv, err = hkdf.Expand(sha256.New, prk, "odoh nonce", nn)
	return key, iv, err
}

// Open opens the target's answer to q, returning the DNS message.
func (q *Query) Open(raw []byte) ([]byte, error) {
	nonce, ct, err := parseMessage(raw, typeResponse)
	if err != nil {
		return nil, err
	}
	key, iv, err := responseKeys(q.secret, q.plain, nonce)
	if err != nil {
		return nil, fmt.Errorf("odoh: %w", err)
	}
	plain, err := openAESGCM(key, iv, aad(typeResponse, nonce), ct)
	if err != nil {
		return nil, errors.New("odoh: the answer does not open")
	}
	return parsePlaintext(plain)
}

// Received is a query the target opened, to seal its answer with.
type Received struct {
	plain  []byte
	secret []byte
}

// Open opens a query sealed to kp: the DNS message, and the state to
// seal the answer. A query to another key is ErrUnknownKey.
func (kp *KeyPair) Open(raw []byte) ([]byte, *Received, error) {
	keyID, body, err := parseMessage(raw, typeQuery)
	if err != nil {
		return nil, nil, err
	}
	if subtle.ConstantTimeCompare(keyID, kp.keyID) != 1 {
		return nil, nil, ErrUnknownKey
	}
	if len(body) < 32 {
		return nil, nil, errors.New("odoh: query too short")
	}
	r, err := hpke.NewRecipient(body[:32], kp.sk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte("odoh query"))
	if err != nil {
		return nil, nil, fmt.Errorf("odoh: %w", err)
	}
	plain, err := r.Open(aad(typeQuery, keyID), body[32:])
	if err != nil {
		return nil, nil, errors.New("odoh: the query does not open")
	}
	msg, err := parsePlaintext(plain)
	if err != nil {
		return nil, nil, err
	}
	secret, err := r.Export("odoh response", nk)
	if err != nil {
		return nil, nil, fmt.Errorf("odoh: %w", err)
	}
	return msg, &Received{plain: plain, secret: secret}, nil
}

// Seal seals the target's DNS answer (wire form) to the query received,
// padded to a multiple of pad octets (0: none).
func (r *Received) Seal(dnsAnswer []byte, pad int) ([]byte, error) {
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	return r.sealWith(dnsAnswer, pad, nonce)
}

// sealWith is Seal with the response nonce given (RFC 9230's test
// vectors fix it).
func (r *Received) sealWith(dnsAnswer []byte, pad int, nonce []byte) ([]byte, error) {
	key, iv, err := responseKeys(r.secret, r.plain, nonce)
	if err != nil {
		return nil, fmt.Errorf("odoh: %w", err)
	}
	plain, err := padded(dnsAnswer, pad, 0)
	if err != nil {
		return nil, err
	}
	ct, err := sealAESGCM(key, iv, aad(typeResponse, nonce), plain)
	if err != nil {
		return nil, fmt.Errorf("odoh: %w", err)
	}
	return message(typeResponse, nonce, ct), nil
}

func sealAESGCM(key, iv, ad, plain []byte) ([]byte, error) {
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	return a.Seal(nil, iv, plain, ad), nil
}

func openAESGCM(key, iv, ad, ct []byte) ([]byte, error) {
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	return a.Open(nil, iv, ct, ad)
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// maxConfigs is the longest ObliviousDoHConfigs: its 16-bit length and
// that many octets.
const maxConfigs = 2 + 65535

// FetchConfig fetches host's ObliviousDoHConfigs from its well-known
// URL over rt and returns the first config this package speaks.
func FetchConfig(ctx context.Context, rt http.RoundTripper, host string) (Config, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+ConfigsPath, nil)
	if err != nil {
		return Config{}, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return Config{}, fmt.Errorf("fetching the ODoH target's config: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigs+1))
	switch {
	case err != nil:
	case resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	case len(body) > maxConfigs:
		err = fmt.Errorf("a body longer than the %d octets ObliviousDoHConfigs can be", maxConfigs)
	}
	if err != nil {
		return Config{}, fmt.Errorf("fetching the ODoH target's config: %w", err)
	}
	c, err := ParseConfigs(body)
	if err != nil {
		return Config{}, fmt.Errorf("the ODoH target's config: %w", err)
	}
	return c, nil
}

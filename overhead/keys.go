package overhead

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"strings"
)

// KeyLog holds TLS 1.3 secrets in NSS key log format, by client random.
// quic-go logs QUIC's secrets under the same labels.
type KeyLog map[string]map[string][]byte

// ReadKeyLog parses a key log.
func ReadKeyLog(r io.Reader) (KeyLog, error) {
	kl := KeyLog{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		secret, err := hex.DecodeString(f[2])
		if err != nil {
			continue
		}
		cr := strings.ToLower(f[1])
		if kl[cr] == nil {
			kl[cr] = map[string][]byte{}
		}
		kl[cr][f[0]] = secret
	}
	return kl, sc.Err()
}

// suite is a TLS 1.3 cipher suite's AEAD key length and hash.
type suite struct {
	keyLen int
	hash   func() hash.Hash
}

var suites = map[uint16]suite{
	0x1301: {16, sha256.New}, // TLS_AES_128_GCM_SHA256
	0x1302: {32, sha512.New384},
}

// hkdfExpandLabel is RFC 8446 §7.1's HKDF-Expand-Label with an empty context.
func hkdfExpandLabel(h func() hash.Hash, secret []byte, label string, length int) []byte {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0)
	var out, prev []byte
	for i := byte(1); len(out) < length; i++ {
		m := hmac.New(h, secret)
		m.Write(prev)
		m.Write(info)
		m.Write([]byte{i})
		prev = m.Sum(nil)
		out = append(out, prev...)
	}
	return out[:length]
}

func hkdfExtract(h func() hash.Hash, salt, ikm []byte) []byte {
	m := hmac.New(h, salt)
	m.Write(ikm)
	return m.Sum(nil)
}

// aeadKeys are one direction's keys at one epoch.
type aeadKeys struct {
	aead cipher.AEAD
	iv   []byte
	hp   cipher.Block // QUIC header protection
}

func newKeys(s suite, secret []byte, quic bool) *aeadKeys {
	prefix := ""
	if quic {
		prefix = "quic "
	}
	key := hkdfExpandLabel(s.hash, secret, prefix+"key", s.keyLen)
	iv := hkdfExpandLabel(s.hash, secret, prefix+"iv", 12)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil
	}
	k := &aeadKeys{aead: aead, iv: iv}
	if quic {
		k.hp, _ = aes.NewCipher(hkdfExpandLabel(s.hash, secret, "quic hp", s.keyLen))
	}
	return k
}

func (k *aeadKeys) nonce(seq uint64) []byte {
	n := append([]byte(nil), k.iv...)
	for i := 0; i < 8; i++ {
		n[len(n)-1-i] ^= byte(seq >> (8 * i))
	}
	return n
}

// quicInitialSalt is QUIC v1's (RFC 9001 §5.2).
var quicInitialSalt = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a}

// initialKeys derives QUIC v1 Initial keys from the client's first
// Destination Connection ID: client and server direction.
func initialKeys(dcid []byte) (client, server *aeadKeys) {
	s := suites[0x1301]
	initial := hkdfExtract(sha256.New, quicInitialSalt, dcid)
	return newKeys(s, hkdfExpandLabel(sha256.New, initial, "client in", 32), true),
		newKeys(s, hkdfExpandLabel(sha256.New, initial, "server in", 32), true)
}

package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"strings"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/internal/listfile"
)

// identity is the one TLS identity of all listeners: certificate, session
// ticket keys and QUIC token key. Sharing them is what lets a ticket from
// one listener resume on another, as the cross-layer paper needed a
// CoreDNS fork for.
type identity struct {
	cert       tls.Certificate
	byName     map[string]*tls.Certificate // with tls.cert_per_name
	certPEM    []byte                      // every certificate in use
	spki       string                      // base64 SHA-256 of the SubjectPublicKeyInfo, for Chromium's --ignore-certificate-errors-spki-list
	ticketKeys [][32]byte
	tokenKey   quic.TokenGeneratorKey
	keyLog     io.Writer // tls.key_log, if set
}

func loadIdentity(c *TLS, names []string) (*identity, error) {
	id := &identity{}
	var err error
	if c.CertPerName && c.Cert != "" {
		return nil, fmt.Errorf("tls.cert_per_name generates the certificates: give no tls.cert")
	}
	if c.Cert != "" {
		if id.cert, id.certPEM, err = loadKeyPair(c.Cert, c.Key); err != nil {
			return nil, fmt.Errorf("loading tls.cert/tls.key: %w", err)
		}
	} else {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		if id.cert, id.certPEM, err = generateCert(key, append(c.Names, names...)); err != nil {
			return nil, err
		}
		if c.CertPerName {
			id.byName = map[string]*tls.Certificate{}
			for _, n := range c.Names {
				if net.ParseIP(n) != nil || id.byName[strings.ToLower(n)] != nil {
					continue
				}
				cert, pemBytes, err := generateCert(key, []string{n})
				if err != nil {
					return nil, err
				}
				id.byName[strings.ToLower(n)] = &cert
				id.certPEM = append(id.certPEM, pemBytes...)
			}
		}
	}
	leaf, err := x509.ParseCertificate(id.cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parsing certificate: %w", err)
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	id.spki = base64.StdEncoding.EncodeToString(sum[:])
	if c.CertOut != "" {
		if err := os.WriteFile(c.CertOut, id.certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("writing tls.cert_out: %w", err)
		}
	}
	key, err := keyFile(c.TicketKeys)
	if err != nil {
		return nil, fmt.Errorf("tls.ticket_keys: %w", err)
	}
	id.ticketKeys = [][32]byte{[32]byte(key)}
	if key, err = keyFile(c.TokenKey); err != nil {
		return nil, fmt.Errorf("tls.token_key: %w", err)
	}
	id.tokenKey = quic.TokenGeneratorKey(key)
	return id, nil
}

// keyOctets is the size of every key and seed the server keeps in a file.
const keyOctets = 32

// loadKeyPair is tls.LoadX509KeyPair with each file's size bounded, and
// the certificates' PEM.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, []byte, error) {
	certPEM, err := listfile.Read(certFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM, err := listfile.Read(keyFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// keyFile reads keyOctets random octets from path, creating the file if
// missing; with no path the key is fresh.
func keyFile(path string) ([]byte, error) {
	n := keyOctets
	if path != "" {
		b, err := listfile.Read(path)
		if err == nil {
			if len(b) < n {
				return nil, fmt.Errorf("%s holds %d octets, want %d", path, len(b), n)
			}
			return b[:n], nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	b := make([]byte, n)
	rand.Read(b)
	if path != "" {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// tlsConfig is a server config with the shared identity and ticket keys.
func (id *identity) tlsConfig(alpn ...string) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{id.cert}, NextProtos: alpn, MinVersion: tls.VersionTLS12}
	if id.byName != nil {
		cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := id.byName[strings.ToLower(hello.ServerName)]; c != nil {
				return c, nil
			}
			return &id.cert, nil
		}
	}
	cfg.SetSessionTicketKeys(id.ticketKeys)
	cfg.KeyLogWriter = id.keyLog
	return cfg
}

// tcpTLS is the TLS config of the listeners over TCP, with the configured
// version cap.
func (s *Server) tcpTLS(alpn ...string) *tls.Config {
	cfg := s.id.tlsConfig(alpn...)
	if s.cfg.TLS.MaxVersion == "1.2" {
		cfg.MaxVersion = tls.VersionTLS12
	}
	return cfg
}

// generateCert makes a small self-signed certificate for an ECDSA P-256
// key: small so that a QUIC server's first flight stays under the 3x
// amplification limit.
func generateCert(key *ecdsa.PrivateKey, names []string) (tls.Certificate, []byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "doxlab"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	seen := map[string]bool{}
	for _, n := range append([]string{"localhost", "127.0.0.1", "::1"}, names...) {
		if h, _, err := net.SplitHostPort(n); err == nil {
			n = h
		}
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if ip := net.ParseIP(n); ip != nil {
			if !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generating certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}

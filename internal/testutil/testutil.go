// Package testutil is what tests share and no library may import (a
// lint rule keeps it so): it starts real, independent DNS servers on
// loopback for tests: CoreDNS (Go module proxy), Unbound (Debian) and aioquic's DoQ
// example server (PyPI). .ci/run installs them; on a developer machine
// without them the tests that need them are skipped, while under CI
// (CI=true) a missing peer fails the test, so CI cannot pass vacuously.
package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Zone is what every peer serves: example.test has one A record; any
// other name under test. is NXDOMAIN.
const (
	ZoneName   = "example.test."
	ZoneA      = "192.0.2.1"
	NXName     = "missing.test."
	ServerName = "dns.test"
)

// Cert is a small ECDSA P-256 certificate for 127.0.0.1, ::1, localhost
// and dns.test, small enough to stay under QUIC's 3x amplification limit.
type Cert struct {
	CertFile, KeyFile string
	Pool              *x509.CertPool
	SPKI              string // base64 SHA-256 of the public key, as Chromium takes it
}

// NewCert writes a fresh self-signed certificate into a temp directory.
func NewCert(t testing.TB) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: ServerName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		DNSNames:              []string{ServerName, "localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Cert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool()}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	must(t, os.WriteFile(c.CertFile, certPEM, 0o600))
	must(t, os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	c.Pool.AppendCertsFromPEM(certPEM)
	leaf, _ := x509.ParseCertificate(der)
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	c.SPKI = base64.StdEncoding.EncodeToString(sum[:])
	return c
}

// CA is a certificate authority and a server certificate it signed, for
// clients that refuse a self-signed certificate as a server's own
// (Firefox: a CA certificate used as an end entity).
type CA struct {
	CAFile, CertFile, KeyFile string
}

// NewCA writes a fresh CA and a certificate it signed for names (and
// 127.0.0.1) into a temp directory.
func NewCA(t testing.TB, names ...string) *CA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "doxlab test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + 1), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	dir := t.TempDir()
	c := &CA{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	must(t, os.WriteFile(c.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	must(t, os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// NeedRoot stops a test that needs root (a testbed, a raw socket, a port
// below 1024): skipped under -short, the laptop's check, and where it is
// not the machine's root (failed under CI, which runs as root); the root
// of Rootless's namespace is not.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + why)
	}
	if os.Geteuid() != 0 || inRootless() {
		Missing(t, why)
	}
}

// NeedChromium is Chromium's executable for a test that drives it,
// skipped under -short.
func NeedChromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the test drives Chromium")
	}
	return Need(t, "chromium", "apt-get install chromium")
}

// Need finds a peer's executable, or skips (fails under CI) with how to
// install it.
func Need(t testing.TB, name, install string, candidates ...string) string {
	t.Helper()
	for _, c := range append(candidates, name) {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	Missing(t, fmt.Sprintf("%s not found; install it with: %s (or run bash .ci/run)", name, install))
	return ""
}

// Missing skips the test, or fails it under CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// givenPorts are the ports FreePort returned.
var givenPorts sync.Map

// FreePort returns a port free on 127.0.0.1 for both TCP and UDP, and
// one it has not returned before in this process: the kernel may hand
// out a port again once its probe is closed, and a peer given one port
// twice (CoreDNS's DoT and DoH) serves only one of them. It is drawn
// below the kernel's ephemeral range where it can: a port taken from
// that range is free only until another test binary running beside
// this one (go test runs packages at once) binds port 0 and is given
// it, and the server this port was for cannot bind. And it is claimed
// among those binaries (claimPort): two of them drawing one port, each
// before the other's server bound it, failed a peer's start in CI
// ("Address already in use").
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := belowEphemeral()
	for range 200 {
		addr := "127.0.0.1:0"
		if hi > lo {
			addr = fmt.Sprintf("127.0.0.1:%d", lo+mrand.IntN(hi-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: draw again
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			if _, dup := givenPorts.LoadOrStore(port, true); !dup && claimPort(port) {
				return port
			}
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// belowEphemeral is the range FreePort draws from: from 10000 to the
// start of the kernel's ephemeral ports, or none where it cannot tell.
func belowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first <= 11000 {
		return 0, 0
	}
	return 10000, first
}

// Start runs a peer process until the test ends, keeping its output for
// the failure log.
func Start(t testing.TB, dir string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	logf, err := os.Create(filepath.Join(dir, filepath.Base(name)+".log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("%s output:\n%s", filepath.Base(name), tail(string(out), 3000))
		}
	})
	return cmd
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// peerReady is how long a peer may take to start: a wait, not a bound
// (it ends at the first answer). CoreDNS starts in 0.1 s, in 3 s beside
// stress-ng's CPU, I/O and disk hogs, and once printed nothing in 15 s
// under CI's three test lanes.
const peerReady = 60 * time.Second

// WaitDNS waits until addr answers a query over network (udp or tcp).
func WaitDNS(t testing.TB, network, addr string) {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 200 * time.Millisecond}
	q := new(dns.Msg)
	q.SetQuestion(ZoneName, dns.TypeA)
	deadline := time.Now().Add(peerReady)
	for time.Now().Before(deadline) {
		if _, _, err := c.Exchange(q, addr); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no DNS answer from %s/%s after %v", network, addr, peerReady)
}

// WaitListen waits until something accepts TCP connections, or binds UDP, on addr.
func WaitListen(t testing.TB, network, addr string) {
	t.Helper()
	deadline := time.Now().Add(peerReady)
	for time.Now().Before(deadline) {
		switch network {
		case "tcp":
			if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
				c.Close()
				return
			}
		case "udp":
			if c, err := net.ListenPacket("udp", addr); err != nil {
				return // taken: the peer has bound it
			} else {
				c.Close()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listening on %s/%s after %v", network, addr, peerReady)
}

func write(t testing.TB, path, content string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(strings.TrimLeft(content, "\n")), 0o600))
}

func netListenUDP(addr string) (net.PacketConn, error) { return net.ListenPacket("udp", addr) }

// WriteZone writes the test zone as an RFC 1035 zone file into dir and
// returns its path.
func WriteZone(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "test.zone")
	write(t, path, fmt.Sprintf(`
$ORIGIN test.
@       3600 IN SOA ns.test. hostmaster.test. 1 7200 3600 1209600 300
@       3600 IN NS  ns.test.
ns      3600 IN A   127.0.0.1
example  300 IN A   %s
`, ZoneA))
	return path
}

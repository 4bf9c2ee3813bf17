package testutil

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCertIsWhatPeersTake: NewCert's certificate is valid for every name
// and address the peers dial (dns.test, localhost, 127.0.0.1, ::1) and no
// other, a TLS handshake over it completes, its SPKI pin is the one
// Chromium's --ignore-certificate-errors-spki-list takes, and it is small
// enough that a QUIC server's first flight (certificate, key share and
// handshake messages) stays under three times a 1200-octet Initial.
func TestCertIsWhatPeersTake(t *testing.T) {
	c := NewCert(t)
	leaf := readLeaf(t, c.CertFile)
	for _, name := range []string{ServerName, "localhost", "127.0.0.1", "::1"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: c.Pool})
		require.NoError(t, err, name)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: c.Pool})
	require.Error(t, err)
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	require.Equal(t, base64.StdEncoding.EncodeToString(sum[:]), c.SPKI)
	require.Less(t, len(leaf.Raw), 1000, "under the amplification limit with room for the rest of the flight")
	handshake(t, c.CertFile, c.KeyFile, &tls.Config{RootCAs: c.Pool, ServerName: "localhost"})
}

// TestCAIsWhatFirefoxTakes: NewCA's server certificate chains to its CA
// for the names asked and 127.0.0.1, is no CA itself (Firefox refuses a
// CA certificate as a server's own), and a handshake trusting only the
// CA completes.
func TestCAIsWhatFirefoxTakes(t *testing.T) {
	c := NewCA(t, "a.test", "b.test")
	ca, leaf := readLeaf(t, c.CAFile), readLeaf(t, c.CertFile)
	require.True(t, ca.IsCA)
	require.False(t, leaf.IsCA, "an end entity")
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"a.test", "b.test", "127.0.0.1"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		require.NoError(t, err, name)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots})
	require.Error(t, err, "only the names asked")
	handshake(t, c.CertFile, c.KeyFile, &tls.Config{RootCAs: roots, ServerName: "b.test"})
}

// TestFreePortIsFreeAndNeverGivenTwice: every port FreePort gives is
// free on 127.0.0.1 for TCP and UDP as it is given, none twice, and all
// below the kernel's ephemeral range where the kernel says what it is.
func TestFreePortIsFreeAndNeverGivenTwice(t *testing.T) {
	lo, hi := belowEphemeral()
	seen := map[int]bool{}
	for range 100 {
		p := FreePort(t)
		require.False(t, seen[p], "port %d given twice", p)
		seen[p] = true
		if hi > lo {
			require.GreaterOrEqual(t, p, lo)
			require.Less(t, p, hi)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err)
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err)
		l.Close()
		u.Close()
	}
}

// TestPortClaimedByAnotherBinaryIsNotGiven: a port another test binary
// claimed (this test binary again, as a child) is not given here while
// that binary lives, whether or not anything is bound to it, and is
// once it has exited, however it exits (the child is killed).
func TestPortClaimedByAnotherBinaryIsNotGiven(t *testing.T) {
	if os.Getenv("DOXLAB_CLAIM_PORT") != "" {
		p := 20000 + os.Getpid()%10000
		for !claimPort(p) { // one no other binary holds
			p++
		}
		fmt.Println(p)
		time.Sleep(time.Minute) // killed before
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no flock here")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestPortClaimedByAnotherBinaryIsNotGiven$")
	child.Env = append(os.Environ(), "DOXLAB_CLAIM_PORT=1")
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	p, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "the child's line: %q", line)
	require.False(t, claimPort(p), "claimed by the child")
	require.NoError(t, child.Process.Kill())
	child.Wait()
	require.True(t, claimPort(p), "the child's claim ended with it")
	require.False(t, claimPort(p), "claimed here now, for good")
}

func readLeaf(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// handshake runs a TLS handshake over a pipe: the server with the
// certificate and key files, the client with cfg.
func handshake(t *testing.T, certFile, keyFile string, cfg *tls.Config) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() { done <- tls.Server(a, &tls.Config{Certificates: []tls.Certificate{pair}}).Handshake() }()
	require.NoError(t, tls.Client(b, cfg).Handshake())
	require.NoError(t, <-done)
}

// TestDoxlabSharedByTestBinaries: test binaries given one BinDirEnv
// directory (make test's) run one doxlab, built by the first of them,
// which stays when that binary exits; the second builds nothing.
func TestDoxlabSharedByTestBinaries(t *testing.T) {
	if os.Getenv("DOXLAB_PRINT_DOXLAB") != "" {
		fmt.Println(Doxlab(t))
		return
	}
	dir := os.Getenv(BinDirEnv) // make test's, built there once either way
	fresh := dir == ""
	if fresh {
		dir = t.TempDir()
	}
	child := func() (string, os.FileInfo) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDoxlabSharedByTestBinaries$")
		cmd.Env = append(os.Environ(), "DOXLAB_PRINT_DOXLAB=1", BinDirEnv+"="+dir)
		out, err := cmd.Output()
		require.NoError(t, err, "%s", out)
		path, _, _ := strings.Cut(string(out), "\n")
		fi, err := os.Stat(path)
		require.NoError(t, err, "the binary outlives the test binary that built it")
		return path, fi
	}
	p1, f1 := child()
	p2, f2 := child()
	require.Equal(t, filepath.Join(dir, "doxlab"), p1)
	require.Equal(t, p1, p2)
	require.True(t, os.SameFile(f1, f2), "the second ran the first's build")
	require.Equal(t, f1.ModTime(), f2.ModTime())
	out, err := exec.Command(p1, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	if fresh {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "doxlab alone, its build's directory gone")
	}
}

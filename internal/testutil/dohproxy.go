package testutil

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// DoHProxyBin is where .ci/run installs DNSCrypt's doh-proxy (Rust,
// odoh-rs): a DoH and Oblivious DoH target in front of a Do53 resolver.
const DoHProxyBin = "/opt/doxlab-peers/bin/doh-proxy"

// StartDoHProxy runs doh-proxy on 127.0.0.1 with ca's certificate,
// forwarding to the Do53 server upstream, and returns its address; its
// ODoH target is at /dns-query, its configs at /.well-known/odohconfigs.
func StartDoHProxy(t testing.TB, ca *CA, upstream string) string {
	t.Helper()
	bin := Need(t, "doh-proxy", "cargo install --locked doh-proxy@0.11.1", DoHProxyBin)
	dir := t.TempDir()
	// doh-proxy reads a PKCS#8 key.
	b, err := os.ReadFile(ca.KeyFile)
	must(t, err)
	block, _ := pem.Decode(b)
	key, err := x509.ParseECPrivateKey(block.Bytes)
	must(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	keyFile := filepath.Join(dir, "key8.pem")
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	addr := "127.0.0.1:" + strconv.Itoa(FreePort(t))
	Start(t, dir, bin, "-l", addr, "-u", upstream, "-i", ca.CertFile, "-I", keyFile, "-H", "localhost", "-T", "0")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("doh-proxy did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

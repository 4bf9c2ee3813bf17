package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// AioquicDoQ is aioquic's DoQ example server (PyPI, Python): a QUIC stack
// not written in Go. It forwards every query to classic DNS on port 53 of
// Upstream, so a CoreDNS listens there.
type AioquicDoQ struct {
	Cert     *Cert
	Addr     string
	QUIC     string
	Upstream string
}

// AioquicExamples is where .ci/run unpacks aioquic's sdist examples;
// DOXLAB_AIOQUIC_EXAMPLES overrides it.
func AioquicExamples() string {
	if d := os.Getenv("DOXLAB_AIOQUIC_EXAMPLES"); d != "" {
		return d
	}
	return "/opt/doxlab-peers/aioquic/examples"
}

// Aioquic is python3 and the path of one of aioquic's example scripts,
// when the script is here and python3 imports modules (aioquic, and what
// the script needs beside); else the test is Missing them.
func Aioquic(t testing.TB, script string, modules ...string) (py, path string) {
	t.Helper()
	path = filepath.Join(AioquicExamples(), script)
	if _, err := os.Stat(path); err != nil {
		Missing(t, "aioquic's "+script+" not found at "+path+"; run bash .ci/run")
	}
	py = Need(t, "python3", "apt-get install python3")
	if err := exec.Command(py, "-c", "import "+strings.Join(modules, ", ")).Run(); err != nil {
		Missing(t, fmt.Sprintf("python modules %s missing: pip install %s", strings.Join(modules, " and "), strings.Join(modules, " ")))
	}
	return py, path
}

// StartAioquicDoQ starts the DoQ server, with a Retry for every new
// connection if retry is set. Its upstream must be on port 53, so it needs
// root to bind a private loopback address.
func StartAioquicDoQ(t testing.TB, retry bool) *AioquicDoQ {
	t.Helper()
	py, script := Aioquic(t, "doq_server.py", "aioquic", "dnslib")
	if os.Geteuid() != 0 {
		Missing(t, "aioquic's DoQ example forwards to port 53, which needs root")
	}
	up := startUpstream53(t)
	a := &AioquicDoQ{Cert: NewCert(t), Upstream: up}
	port := FreePort(t)
	a.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	a.QUIC = "quic://" + a.Addr
	args := []string{script, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "-c", a.Cert.CertFile, "-k", a.Cert.KeyFile, "--resolver", up}
	if retry {
		args = append(args, "--retry")
	}
	Start(t, t.TempDir(), py, args...)
	WaitListen(t, "udp", a.Addr)
	return a
}

// startUpstream53 runs CoreDNS's classic DNS on port 53 of a loopback
// address of its own (127.53.x.y), away from any system resolver.
func startUpstream53(t testing.TB) string {
	t.Helper()
	bin := Need(t, "coredns", "go install github.com/coredns/coredns@v1.15.0", filepath.Join(os.Getenv("HOME"), "go", "bin", "coredns"))
	dir := t.TempDir()
	for i := range 20 {
		ip := fmt.Sprintf("127.53.%d.%d", os.Getpid()%250+1, i+1)
		if c, err := netListenUDP(ip + ":53"); err != nil {
			continue
		} else {
			c.Close()
		}
		write(t, filepath.Join(dir, "Corefile"), fmt.Sprintf(`
dns://test:53 {
  bind %s
  file %s test
}
`, ip, WriteZone(t, dir)))
		Start(t, dir, bin, "-conf", "Corefile")
		WaitDNS(t, "udp", ip+":53")
		return ip
	}
	t.Fatal("no loopback address with port 53 free")
	return ""
}

package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// CoreDNS is a running CoreDNS serving the test zone on every transport it
// has: Do53, DoT, DoH/2 and DoH/3 (one port, TCP and UDP) and DoQ.
type CoreDNS struct {
	Cert                           *Cert
	Do53, DoT, DoH, DoQ            string // host:port
	UDP, TCP, TLS, HTTPS, H3, QUIC string // URLs for doxlab's transports
	Dir                            string

	t   testing.TB
	bin string
	cmd *exec.Cmd
}

// StartCoreDNS starts CoreDNS built from the Go module proxy
// (go install github.com/coredns/coredns@v1.15.0).
func StartCoreDNS(t testing.TB) *CoreDNS {
	t.Helper()
	bin := Need(t, "coredns", "go install github.com/coredns/coredns@v1.15.0", filepath.Join(os.Getenv("HOME"), "go", "bin", "coredns"))
	c := &CoreDNS{Cert: NewCert(t), Dir: t.TempDir(), t: t, bin: bin}
	p53, pt, ph, pq := FreePort(t), FreePort(t), FreePort(t), FreePort(t)
	c.Do53 = fmt.Sprintf("127.0.0.1:%d", p53)
	c.DoT = fmt.Sprintf("127.0.0.1:%d", pt)
	c.DoH = fmt.Sprintf("127.0.0.1:%d", ph)
	c.DoQ = fmt.Sprintf("127.0.0.1:%d", pq)
	c.UDP, c.TCP, c.TLS = "udp://"+c.Do53, "tcp://"+c.Do53, "tls://"+c.DoT
	c.HTTPS, c.H3, c.QUIC = "https://"+c.DoH+"/dns-query", "h3://"+c.DoH+"/dns-query", "quic://"+c.DoQ
	write(t, filepath.Join(c.Dir, "Corefile"), fmt.Sprintf(`
dns://test:%d tls://test:%d https://test:%d https3://test:%d quic://test:%d {
  bind 127.0.0.1
  tls %s %s
  file %s test
}
`, p53, pt, ph, ph, pq, c.Cert.CertFile, c.Cert.KeyFile, WriteZone(t, c.Dir)))
	c.start()
	return c
}

func (c *CoreDNS) start() {
	c.cmd = Start(c.t, c.Dir, c.bin, "-conf", "Corefile")
	WaitDNS(c.t, "udp", c.Do53)
	WaitListen(c.t, "tcp", c.DoT)
	WaitListen(c.t, "tcp", c.DoH)
	WaitListen(c.t, "udp", c.DoQ)
}

// Stop stops CoreDNS for good.
func (c *CoreDNS) Stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// Restart stops CoreDNS and starts it again on the same ports. Its TLS
// session-ticket keys are made anew, so tickets issued before no longer
// resume and 0-RTT attempts with them are rejected.
func (c *CoreDNS) Restart() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
	c.start()
}

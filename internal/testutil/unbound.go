package testutil

import (
	"fmt"
	"path/filepath"
	"testing"
)

// Unbound is a running Unbound (Debian) serving the test zone over Do53,
// DoT and DoH/2.
type Unbound struct {
	Cert            *Cert
	Do53, DoT, DoH  string
	UDP, TLS, HTTPS string
}

// StartUnbound starts Unbound in the foreground with a config of its own.
func StartUnbound(t testing.TB) *Unbound {
	t.Helper()
	bin := Need(t, "unbound", "apt-get install unbound", "/usr/sbin/unbound")
	u := &Unbound{Cert: NewCert(t)}
	dir := t.TempDir()
	p53, pt, ph := FreePort(t), FreePort(t), FreePort(t)
	u.Do53, u.DoT, u.DoH = fmt.Sprintf("127.0.0.1:%d", p53), fmt.Sprintf("127.0.0.1:%d", pt), fmt.Sprintf("127.0.0.1:%d", ph)
	u.UDP, u.TLS, u.HTTPS = "udp://"+u.Do53, "tls://"+u.DoT, "https://"+u.DoH+"/dns-query"
	write(t, filepath.Join(dir, "unbound.conf"), fmt.Sprintf(`
server:
  verbosity: 1
  username: ""
  chroot: ""
  directory: "%[1]s"
  pidfile: "%[1]s/unbound.pid"
  use-syslog: no
  logfile: ""
  do-daemonize: no
  interface: 127.0.0.1@%[2]d
  interface: 127.0.0.1@%[3]d
  interface: 127.0.0.1@%[4]d
  port: %[2]d
  tls-port: %[3]d
  https-port: %[4]d
  http-endpoint: "/dns-query"
  tls-service-key: "%[5]s"
  tls-service-pem: "%[6]s"
  access-control: 127.0.0.0/8 allow
  module-config: "iterator"
  do-not-query-localhost: yes
  local-zone: "test." static
  local-data: "example.test. 300 IN A %[7]s"
remote-control:
  control-enable: no
`, dir, p53, pt, ph, u.Cert.KeyFile, u.Cert.CertFile, ZoneA))
	Start(t, dir, bin, "-d", "-c", filepath.Join(dir, "unbound.conf"))
	WaitDNS(t, "udp", u.Do53)
	WaitListen(t, "tcp", u.DoT)
	WaitListen(t, "tcp", u.DoH)
	return u
}

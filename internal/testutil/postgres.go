package testutil

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartPostgres runs a PostgreSQL server (Debian's) in a cluster of its
// own in a temp directory and returns a URL for it. PostgreSQL refuses to
// run as root, so root's clusters belong to the postgres user; another
// user's, to that user.
func StartPostgres(t testing.TB) string {
	return NewPostgres(t, "127.0.0.1", nil).URL
}

// Postgres is a PostgreSQL server of a test's own, which the test can
// restart.
type Postgres struct {
	URL string

	t        testing.TB
	bin, dir string
	listen   string
	port     int
	uid, gid int // the cluster's owner: the postgres user's for root
	wrap     func(argv ...string) *exec.Cmd
	cmd      *exec.Cmd
}

// NewPostgres starts a PostgreSQL server listening on listen. wrap, if
// set, runs each of its programs (a testbed host's Command, to serve from
// inside the host); they then drop root with setpriv.
func NewPostgres(t testing.TB, listen string, wrap func(argv ...string) *exec.Cmd) *Postgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		Missing(t, "PostgreSQL not found: apt-get install postgresql")
	}
	p := &Postgres{t: t, bin: filepath.Dir(bins[len(bins)-1]), listen: listen, wrap: wrap}
	switch {
	case inRootless():
		// Root here is the user outside, and no other user is mapped.
		Missing(t, "PostgreSQL refuses to run as root, and Rootless's user namespace maps no other user: run the tests as root, or as a user outside that namespace")
	case os.Geteuid() == 0:
		u, err := user.Lookup("postgres")
		if err != nil {
			Missing(t, "no postgres user: apt-get install postgresql")
		}
		p.uid, _ = strconv.Atoi(u.Uid)
		p.gid, _ = strconv.Atoi(u.Gid)
	default:
		p.uid, p.gid = os.Geteuid(), os.Getegid()
	}
	var err error
	p.dir, err = os.MkdirTemp("", "doxlab-pg")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(p.dir) })
	must(t, os.Chown(p.dir, p.uid, p.gid))
	if out, err := exec.Command("cp", "-a", p.template(), p.data()).CombinedOutput(); err != nil {
		t.Fatalf("copying the cluster: %v: %s", err, out)
	}
	// initdb trusts loopback only; a server in a testbed host is reached
	// from the other hosts, on the testbed's own subnet.
	hba, err := os.OpenFile(filepath.Join(p.data(), "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(hba, "host all all %s/24 trust\n", listen)
	must(t, err)
	must(t, hba.Close())
	p.port = FreePort(t)
	p.URL = fmt.Sprintf("postgres://doxlab@%s/postgres?sslmode=disable", net.JoinHostPort(listen, strconv.Itoa(p.port)))
	p.Start()
	t.Cleanup(func() { p.stop(syscall.SIGQUIT) }) // immediate shutdown: a test cluster has nothing to keep
	return p
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

// template is a cluster made by initdb once for every test process on
// this machine, in the temp directory, named for the server's binaries;
// each test's cluster is a copy of it. initdb takes a second or two of
// CPU, and CI's lanes start some thirty clusters. It is made aside and
// renamed into place, so a process sees it whole or not at all; of two
// made at once, one is kept. Its owner, doxlab, is trusted on loopback
// (a cluster in a testbed host adds its subnet).
func (p *Postgres) template() string {
	p.t.Helper()
	args := []string{"-A", "trust", "-U", "doxlab", "--no-sync"}
	fi, err := os.Stat(filepath.Join(p.bin, "postgres"))
	must(p.t, err)
	// Keyed by its owner too: root's, the postgres user's, cannot be
	// copied by another user.
	key := sha256.Sum256(fmt.Appendf(nil, "%s %d %d %v %d", p.bin, fi.Size(), fi.ModTime().UnixNano(), args, p.uid))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("doxlab-pg-template-%x", key[:6]))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	tmp, err := os.MkdirTemp(p.dir, "initdb")
	must(p.t, err)
	defer os.RemoveAll(tmp)
	must(p.t, os.Chown(tmp, p.uid, p.gid))
	if out, err := p.as(true, "initdb", append([]string{"-D", filepath.Join(tmp, "data")}, args...)...).CombinedOutput(); err != nil {
		p.t.Fatalf("initdb: %v: %s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "data"), dir); err != nil {
		if _, serr := os.Stat(dir); serr != nil {
			p.t.Fatalf("keeping the cluster made by initdb: %v", err)
		}
	}
	return dir
}

// as runs one of PostgreSQL's programs as the cluster's owner: directly
// (not through runuser), so that signalling the process stops PostgreSQL
// itself; inside wrap, through setpriv, which execs in place too.
func (p *Postgres) as(drop bool, prog string, args ...string) *exec.Cmd {
	argv := append([]string{filepath.Join(p.bin, prog)}, args...)
	var cmd *exec.Cmd
	switch {
	case p.wrap != nil && drop:
		cmd = p.wrap(append([]string{"setpriv", "--reuid", strconv.Itoa(p.uid), "--regid", strconv.Itoa(p.gid), "--clear-groups"}, argv...)...)
	case p.wrap != nil:
		cmd = p.wrap(argv...)
	default:
		cmd = exec.Command(argv[0], argv[1:]...)
		if drop && p.uid != os.Geteuid() { // root, to the postgres user
			asUser(cmd, p.uid, p.gid)
		}
	}
	cmd.Dir = p.dir
	return cmd
}

// Start starts the server (again) and waits until it accepts queries.
func (p *Postgres) Start() {
	p.t.Helper()
	p.cmd = p.as(true, "postgres", "-D", p.data(), "-k", p.dir, "-p", strconv.Itoa(p.port), "-c", "listen_addresses="+p.listen, "-c", "fsync=off", "-c", "max_connections=200")
	logf, err := os.OpenFile(filepath.Join(p.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(p.t, err)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	must(p.t, p.cmd.Start())
	// Accepting TCP is not accepting queries ("the database system is
	// starting up"); pg_isready says when it is.
	for deadline := time.Now().Add(peerReady); ; time.Sleep(100 * time.Millisecond) {
		if p.as(false, "pg_isready", "-q", "-h", p.listen, "-p", strconv.Itoa(p.port)).Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("PostgreSQL did not become ready within %v (log: %s)", peerReady, filepath.Join(p.dir, "postgres.log"))
		}
	}
}

// Restart shuts the server down the fast way (clients are disconnected,
// transactions under way rolled back) and starts it again after pause.
func (p *Postgres) Restart(pause time.Duration) {
	p.t.Helper()
	p.stop(syscall.SIGINT)
	time.Sleep(pause)
	p.Start()
}

func (p *Postgres) stop(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	p.cmd.Wait()
	p.cmd = nil
}

// UseTLS makes the server speak TLS with certFile and keyFile (copied
// into its data directory, as the server's user reads them) and take
// hba as its pg_hba.conf, then restarts it.
func (p *Postgres) UseTLS(certFile, keyFile string, hba []string) {
	p.t.Helper()
	for _, f := range []struct{ from, to string }{{certFile, "server.crt"}, {keyFile, "server.key"}} {
		b, err := os.ReadFile(f.from)
		must(p.t, err)
		to := filepath.Join(p.data(), f.to)
		must(p.t, os.WriteFile(to, b, 0o600))
		must(p.t, os.Chown(to, p.uid, p.gid))
	}
	conf, err := os.OpenFile(filepath.Join(p.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	must(p.t, err)
	_, err = fmt.Fprintf(conf, "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nssl_min_protocol_version = 'TLSv1.3'\n")
	must(p.t, err)
	must(p.t, conf.Close())
	must(p.t, os.WriteFile(filepath.Join(p.data(), "pg_hba.conf"), []byte(strings.Join(hba, "\n")+"\n"), 0o600))
	must(p.t, os.Chown(filepath.Join(p.data(), "pg_hba.conf"), p.uid, p.gid))
	p.Restart(0)
}

// Psql runs SQL as the cluster's owner over its socket (local trust).
func (p *Postgres) Psql(sql string) {
	p.t.Helper()
	if out, err := p.as(true, "psql", "-h", p.dir, "-p", strconv.Itoa(p.port), "-U", "doxlab", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput(); err != nil {
		p.t.Fatalf("psql: %v: %s", err, out)
	}
}

// Port is the port the server listens on.
func (p *Postgres) Port() int { return p.port }

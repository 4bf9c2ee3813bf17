package peertest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StartPostgres runs a PostgreSQL server (Debian's) in a cluster of its
// own in a temp directory and returns a URL for it. PostgreSQL refuses to
// run as root, so the cluster belongs to the postgres user.
func StartPostgres(t testing.TB) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		Missing(t, "PostgreSQL not found: apt-get install postgresql")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	u, err := user.Lookup("postgres")
	if err != nil {
		Missing(t, "no postgres user: apt-get install postgresql")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "doxlab-pg")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chown(dir, uid, gid))
	data := filepath.Join(dir, "data")
	// Run as the postgres user directly (not through runuser), so that
	// signalling the process stops PostgreSQL itself.
	as := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = dir
		return cmd
	}
	if out, err := as(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "doxlab", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	port := FreePort(t)
	cmd := as(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown: a test cluster has nothing to keep
		cmd.Wait()
	})
	WaitListen(t, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	// Accepting TCP is not accepting queries ("the database system is
	// starting up"); pg_isready says when it is.
	for i := 0; ; i++ {
		if exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port)).Run() == nil {
			break
		}
		if i == 150 {
			t.Fatal("PostgreSQL did not become ready within 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("postgres://doxlab@127.0.0.1:%d/postgres?sslmode=disable", port)
}

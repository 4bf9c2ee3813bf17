//go:build unix

package testutil

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPostgresForAnyUser: root's test cluster belongs to the postgres
// user, and another user's (go test -short on a laptop) to that user;
// both answer a query. The second runs as nobody, in a copy of this
// binary.
func TestPostgresForAnyUser(t *testing.T) {
	owner := func(p *Postgres) uint32 {
		fi, err := os.Stat(p.data())
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	if os.Getenv("DOXLAB_PG_AS_USER") != "" {
		p := NewPostgres(t, "127.0.0.1", nil)
		p.Psql("SELECT 1")
		require.EqualValues(t, os.Getuid(), owner(p), "the user's own cluster")
		return
	}
	NeedRoot(t, "runs a cluster as root and as nobody")
	p := NewPostgres(t, "127.0.0.1", nil)
	p.Psql("SELECT 1")
	pg, err := user.Lookup("postgres")
	require.NoError(t, err)
	require.Equal(t, pg.Uid, strconv.Itoa(int(owner(p))), "root's cluster is the postgres user's")

	nobody, err := user.Lookup("nobody")
	if err != nil {
		Missing(t, "no user nobody to run a cluster as")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// go test's binary sits in a directory only root reads.
	dir, err := os.MkdirTemp("", "doxlab-pg-user")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	bin := filepath.Join(dir, "testutil.test")
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	child := exec.Command(bin, "-test.run=^TestPostgresForAnyUser$", "-test.v")
	child.Dir = dir
	child.Env = append(os.Environ(), "DOXLAB_PG_AS_USER=1")
	asUser(child, uid, gid)
	out, err := child.CombinedOutput()
	require.NoError(t, err, "as nobody: %s", out)
	require.Contains(t, string(out), "--- PASS: TestPostgresForAnyUser", "ran, not skipped: %s", out)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
)

// TestVantagePointsGuide follows docs/vantage-points.md on an emulated
// network: a coordinator host whose PostgreSQL speaks TLS with a
// certificate from the guide's own CA (examples/deploy/coordinator-tls.sh),
// pg_hba.conf refusing anything without TLS, and a role per worker
// granted by doxlab campaign grant; two vantage hosts that hold only the
// release's static binary and ca.crt, each checked with doxlab worker
// --check over sslmode=verify-full (and refused without TLS, and with a
// name the certificate does not carry), then a worker each, one killed
// and replaced. Every task must be stored exactly once.
func TestVantagePointsGuide(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	testutil.Need(t, "openssl", "apt-get install openssl")
	dir := t.TempDir()
	// The release's binary: static, as make release builds it.
	rel := filepath.Join(dir, "release")
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(rel, "doxlab"), "./cmd/doxlab")
	build.Dir, build.Env = "../..", append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(rel, "doxlab")

	tb, err := testbed.Start(testbed.Spec{Name: "guide", Hosts: []string{"coordinator", "resolver", "fra1", "sin1"}})
	require.NoError(t, err)
	defer tb.Close()
	db := tb.IP("coordinator").String()

	// The coordinator: its CA and certificate, PostgreSQL with TLS only.
	tlsDir := filepath.Join(dir, "tls")
	out, err = exec.Command("bash", "../../examples/deploy/coordinator-tls.sh", tlsDir, db, "db.guide.test").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.WriteFile(filepath.Join(rel, "ca.crt"), must(os.ReadFile(filepath.Join(tlsDir, "ca.crt"))), 0o644))
	pg := testutil.NewPostgres(t, db, func(argv ...string) *exec.Cmd { return tb.Command("coordinator", argv...) })
	pg.UseTLS(filepath.Join(tlsDir, "server.crt"), filepath.Join(tlsDir, "server.key"), []string{
		"local   all  all                    trust",
		"hostssl all  all  10.200.0.0/24     scram-sha-256",
		"host    all  all  0.0.0.0/0         reject",
	})
	pg.Psql(`ALTER ROLE doxlab PASSWORD 'coordinator-secret'; CREATE ROLE w_fra1 LOGIN PASSWORD 'fra1-secret'; CREATE ROLE w_sin1 LOGIN PASSWORD 'sin1-secret'`)
	dsn := func(role, password, host, mode string) string {
		q := url.Values{"sslmode": {mode}, "sslrootcert": {filepath.Join(rel, "ca.crt")}}
		return fmt.Sprintf("postgres://%s:%s@%s:%d/postgres?%s", role, password, host, pg.Port(), q.Encode())
	}
	admin := dsn("doxlab", "coordinator-secret", db, "verify-full")
	run := func(host string, args ...string) (string, error) {
		out, err := tb.Command(host, append([]string{bin}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, role := range []string{"w_fra1", "w_sin1"} {
		out, err := run("coordinator", "campaign", "grant", role, "--store", admin)
		require.NoError(t, err, out)
	}

	srv, err := server.StartIn(&server.Config{Listen: server.Listen{UDP: tb.IP("resolver").String() + ":53", DoQ: tb.IP("resolver").String() + ":853"},
		Answers: server.Answers{Any: "192.0.2.7"}}, func(f func() error) error { return tb.Run("resolver", f) })
	require.NoError(t, err)
	defer srv.Close()
	spec := filepath.Join(dir, "campaign.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`name: guide
targets: [%s]
allow_special: [10.200.0.0/24]
transports: [udp, doq]
conditions: [fresh]
repeat: 10
timeout: 2s
tls: {insecure: true}
vantages:
  - {name: fra1, location: "Frankfurt, DE"}
  - {name: sin1, location: "Singapore, SG"}
`, tb.IP("resolver"))), 0o644))
	out2, err := run("coordinator", "campaign", "plan", spec, "--store", admin)
	require.NoError(t, err, out2)

	// Each vantage point checked before it measures.
	for _, v := range []string{"fra1", "sin1"} {
		out, err := run(v, "worker", "--check", "--vantage", v, "--store", dsn("w_"+v, v+"-secret", db, "verify-full"))
		require.NoError(t, err, out)
		t.Logf("%s:\n%s", v, out)
		require.Contains(t, out, "sslmode=verify-full")
		require.Contains(t, out, "ready to measure")
	}
	out3, err := run("fra1", "worker", "--check", "--vantage", "fra1", "--store", dsn("w_fra1", "fra1-secret", db, "disable"))
	require.Error(t, err, "without TLS the coordinator refuses: %s", out3)
	require.Contains(t, out3, "FAIL")
	out3, err = run("fra1", "worker", "--check", "--vantage", "fra1", "--store", dsn("w_fra1", "fra1-secret", tb.IP("resolver").String(), "verify-full"))
	require.Error(t, err, "a name the certificate does not carry is refused: %s", out3)

	workers := testutil.NewWorkers(t)
	start := func(v string) {
		workers.Start(v, tb.Command(v, bin, "worker", "--vantage", v, "--store", dsn("w_"+v, v+"-secret", db, "verify-full"),
			"--concurrency", "2", "--rescue-after", "10s", "--drain", "--quiet"))
	}
	start("fra1")
	start("sin1")
	time.Sleep(1500 * time.Millisecond)
	if v, pid, ok := workers.Kill("fra1", nil); ok {
		t.Logf("killed %s's worker (pid %d); its replacement starts", v, pid)
		start("fra1")
	}
	require.True(t, workers.Wait(3*time.Minute), "the workers drained their queues")
	out4, err := run("coordinator", "campaign", "status", "--json", "--store", admin)
	require.NoError(t, err, out4)
	var status campaign.Status
	require.NoError(t, json.Unmarshal([]byte(out4[strings.Index(out4, "{"):]), &status))
	for _, v := range status.Vantages {
		require.Equal(t, 20, v.Planned, v.Vantage)
		require.Equal(t, 20, v.Stored, "%s: every task stored once", v.Vantage)
		require.Zero(t, v.Running+v.Waiting+v.Failed, v.Vantage)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDeployUnitsVerify: the guide's systemd units are units systemd
// reads without a warning (systemd-analyze verify, which needs the
// binary there: true(1) stands in for it), and the page worker's bounds
// what a page's renderer may take of the machine's memory.
func TestDeployUnitsVerify(t *testing.T) {
	testutil.Need(t, "systemd-analyze", "apt-get install systemd")
	dir := t.TempDir()
	bin, err := exec.LookPath("true")
	require.NoError(t, err)
	units, err := filepath.Glob("../../examples/deploy/*@.service")
	require.NoError(t, err)
	require.Len(t, units, 2)
	for _, u := range units {
		b, err := os.ReadFile(u)
		require.NoError(t, err)
		require.Contains(t, string(b), "ExecStart=/usr/local/bin/doxlab ", u)
		name := filepath.Base(u)
		unit := strings.ReplaceAll(string(b), "/usr/local/bin/doxlab", bin)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(unit), 0o644))
		out, err := exec.Command("systemd-analyze", "verify", "--man=no", filepath.Join(dir, strings.Replace(name, "@", "@fra1", 1))).CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
		require.Empty(t, strings.TrimSpace(string(out)), "%s: systemd warns", name)
		if strings.Contains(name, "page-worker") {
			require.Contains(t, unit, "\nMemoryMax=", "a page's renderer is bounded")
			require.Contains(t, unit, "\nOOMPolicy=continue", "an OOM kill of the renderer leaves the service running")
		}
	}
}

package cli

import (
	"context"
	"database/sql"
	"encoding/csv"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
)

// TestMeasureResumeAfterKill kills a stored measurement with SIGKILL and
// continues it: in the end every task is stored once, none twice, none lost.
func TestMeasureResumeAfterKill(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	db := filepath.Join(t.TempDir(), "doxlab.db")
	args := []string{"measure", "--store", db, "--ca", cd.Cert.CertFile, "--name", "example.test", "--repeat", "10", "--rate", "4",
		"--transports", "udp,tcp", "--conditions", "fresh", "--seed", "7", cd.UDP, cd.TCP}
	cmd, stderr := startWatched(t, args...)
	stderr.waitFor(t, "(continue it with:")
	runID := regexp.MustCompile(`run (\S+)`).FindStringSubmatch(stderr.String())
	require.Len(t, runID, 2, stderr.String())

	count := func() int {
		code, out, errOut := run("export", "--store", db, "--run", runID[1])
		require.Equal(t, 0, code, errOut)
		rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		require.NoError(t, err)
		return len(rows) - 1
	}
	// Killed once a sample is stored, which a slow disk can delay past
	// any fixed sleep; the 20 tasks take 5 s at 4/s.
	stored := func() int {
		st, err := store.Open(context.Background(), db)
		require.NoError(t, err)
		defer st.Close()
		done, err := st.Done(context.Background(), runID[1])
		require.NoError(t, err)
		return len(done)
	}
	for deadline := time.Now().Add(time.Minute); stored() == 0; time.Sleep(100 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no sample stored within a minute: %s", stderr.String())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	partial := count()
	require.Greater(t, partial, 0, "samples taken before the kill are kept")
	require.Less(t, partial, 20, "the kill came mid-run")

	code, _, errOut := run(append(args, "--run", runID[1], "--rate", "0")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "continuing run")
	require.Equal(t, 20, count(), "2 targets × 10 repetitions, each once")

	// Continuing a finished run measures nothing more.
	code, _, _ = run(append(args, "--run", runID[1], "--rate", "0")...)
	require.Equal(t, 0, code)
	require.Equal(t, 20, count())

	pq := filepath.Join(t.TempDir(), "out.parquet")
	code, _, errOut = run("export", "--store", db, "--format", "parquet", "--out", pq)
	require.Equal(t, 0, code, errOut)
	st, err := os.Stat(pq)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(500))
	code, out, _ := run("export", "--store", db, "--runs")
	require.Equal(t, 0, code)
	require.Contains(t, out, runID[1])
}

func TestMeasureStoreUnreachable(t *testing.T) {
	code, _, errOut := run("measure", "--store", "postgres://doxlab@127.0.0.1:1/x?sslmode=disable", "127.0.0.1")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unreachable")
	code, _, errOut = run("export", "--store", filepath.Join(t.TempDir(), "none.db"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no store")
}

func TestCampaignRun(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "c.yaml")
	db := filepath.Join(dir, "c.db")
	require.NoError(t, os.WriteFile(spec, []byte("name: test\ntargets: [\""+cd.UDP+"\", \""+cd.QUIC+"\"]\nallow_special: [127.0.0.0/8]\nconditions: [fresh, 0rtt]\nquery: {name: example.test}\nrepeat: 3\ntls: {ca: \""+cd.Cert.CertFile+"\"}\nstore: \""+db+"\"\n"), 0o644))
	code, out, errOut := run("campaign", "run", spec)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "progress: 9/9 tasks", "plain progress lines off a terminal")
	require.Contains(t, out, "doq    0rtt")
	id := regexp.MustCompile(`run (\S+)`).FindStringSubmatch(errOut)
	require.Len(t, id, 2)
	code, _, errOut = run("campaign", "run", spec, "--run", id[1])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "continuing run "+id[1]+" (9 samples stored)")
	// The same campaign run again does not silently re-open its finished
	// run: it says so and fails; --new measures it again.
	code, _, errOut = run("campaign", "run", spec)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "run "+id[1]+" of this spec is complete (9 samples); add --new")
	code, _, errOut = run("campaign", "run", spec, "--new")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, errOut, id[1])

	// The report renders from this store.
	repDir := filepath.Join(dir, "rep")
	code, out, errOut = run("report", "--store", db, "--out", repDir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "18 samples")
	require.FileExists(t, filepath.Join(repDir, "report.html"))
	require.FileExists(t, filepath.Join(repDir, "cdf-total.svg"))

	require.NoError(t, os.WriteFile(spec, []byte("targets: [\""+cd.UDP+"\"]\nconditions: [fresh, warm]\n"), 0o644))
	code, _, errOut = run("campaign", "run", spec)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "c.yaml:2: conditions[2]: unknown condition \"warm\"")
}

// TestCampaignPlanAndWorkers plans a campaign for two vantage points in
// PostgreSQL, drains it with a worker each against CoreDNS, and reads it
// back through status, export and the report; and refuses what cannot
// work with one line each.
func TestCampaignPlanAndWorkers(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	pg := testutil.StartPostgres(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("name: two\ntargets: [\""+cd.UDP+"\", \""+cd.QUIC+"\"]\nallow_special: [127.0.0.0/8]\nconditions: [fresh]\nquery: {name: example.test}\nrepeat: 2\n"+
		"tls: {ca: \""+cd.Cert.CertFile+"\"}\nvantages:\n  - {name: fra1, location: \"Frankfurt, DE\", asn: 64500}\n  - {name: nyc1, targets: [\""+cd.UDP+"\"]}\n"), 0o644))

	code, _, errOut := run("campaign", "run", spec)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "names vantages: plan it")
	code, _, errOut = run("campaign", "plan", spec, "--store", filepath.Join(dir, "x.db"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "needs a PostgreSQL store")
	code, _, errOut = run("worker", "--store", pg)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no vantage point")
	code, _, errOut = run("worker", "--vantage", "Frankfurt", "--store", pg)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "vantage name \"Frankfurt\"")
	code, _, errOut = run("worker", "--vantage", "fra1", "--store", pg, "--concurrency", "100000")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--concurrency 100000: want 1 to 1000")

	code, out, errOut := run("campaign", "plan", spec, "--store", pg)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "4 tasks on 2 targets")
	require.Contains(t, out, "6 tasks for 2 vantage points")
	for _, v := range []string{"fra1", "nyc1"} {
		code, out, errOut = run("worker", "--vantage", v, "--store", pg, "--drain")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, v+" "+cd.UDP+" udp fresh: ok")
	}
	code, out, errOut = run("campaign", "status", "--store", pg)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `fra1\s+4\s+4\s+100.0%\s+0\s+0\s+0`, out)
	require.Regexp(t, `all\s+6\s+6\s+100.0%`, out)
	code, csvOut, errOut := run("export", "--store", pg)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, csvOut, ",fra1,127.0.0.1,,64500,\"Frankfurt, DE\",1,")
	code, _, errOut = run("report", "--store", pg, "--out", filepath.Join(dir, "rep"))
	require.Equal(t, 0, code, errOut)
	html, err := os.ReadFile(filepath.Join(dir, "rep", "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), `id="vantages"`)

	code, _, errOut = run("campaign", "cancel", "--store", pg)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "give --run ID")
	code, out, errOut = run("campaign", "plan", spec, "--store", pg)
	require.Equal(t, 0, code, errOut)
	id := regexp.MustCompile(`planned run (\S+):`).FindStringSubmatch(out)
	require.Len(t, id, 2)
	code, out, errOut = run("campaign", "cancel", "--store", pg, "--run", id[1])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "6 jobs not yet taken, 0 under way")
	code, out, errOut = run("campaign", "status", "--store", pg)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `all\s+6\s+0\s+0.0%\s+0\s+0\s+6`, out, "the latest plan, all cancelled")
}

// TestScanVerifySurvey runs the discovery chain on loopback: a scan kept
// in a store, verify reading its candidates from there, the survey and the
// report's survey section.
func TestScanVerifySurvey(t *testing.T) {
	cfg := &server.Config{Listen: server.Listen{DoQ: "127.0.0.1:0", DoT: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}}
	require.NoError(t, cfg.Validate())
	srv, err := server.New(cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Addr("doq").String())
	db := filepath.Join(t.TempDir(), "s.db")
	code, out, errOut := run("scan", "--rate", "50", "--quic-ports", port, "--cooldown", "300ms", "--allow-special", "127.0.0.0/8", "--store", db, "127.0.0.1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "quic  127.0.0.1:"+port)
	id := regexp.MustCompile(`run (scan-\S+)`).FindStringSubmatch(errOut)
	require.Len(t, id, 2, errOut)
	code, out, errOut = run("verify", "--store", db, "--scan-run", id[1])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "doq 127.0.0.1:"+port)
	require.Contains(t, out, "doq            QUIC v1  ALPN doq")
	code, out, errOut = run("survey", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "DoQ features")
	// The hosts that passed, as a campaign's targets file: scan → verify
	// → campaign is one pipeline.
	tf := filepath.Join(t.TempDir(), "targets.txt")
	code, out, errOut = run("survey", "--store", db, "--targets-out", tf, "--speaks", "doq")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1 hosts that passed doq written to "+tf)
	targets, err := measure.ReadTargets(tf)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1"}, targets)
	notes, err := measure.TargetNotes(tf)
	require.NoError(t, err)
	require.Contains(t, notes["127.0.0.1"], "doq QUIC v1 ALPN doq")
	code, _, errOut = run("survey", "--store", db, "--targets-out", tf, "--speaks", "doq,smtp")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `cannot select on "smtp"`)
	code, _, errOut = run("report", "--store", db, "--out", filepath.Join(t.TempDir(), "rep"))
	require.Equal(t, 0, code, errOut)
}

// TestMeasureCarelessInput: values no run can mean and an unknown run ID
// fail at once with one line, before anything is measured.
func TestMeasureCarelessInput(t *testing.T) {
	db := filepath.Join(t.TempDir(), "doxlab.db")
	for name, args := range map[string][]string{
		"rate":        {"--rate", "2e9"},
		"concurrency": {"--concurrency", "-3"},
		"unknown-run": {"--store", db, "--run", "no-such-run"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(append(append([]string{"measure"}, args...), "--transports", "udp", "127.0.0.1")...)
			require.NotEqual(t, 0, code)
			require.Empty(t, out, "nothing measured")
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, errOut)
		})
	}
}

// TestMeasureRidesOutALockedStore: another writer holding the SQLite
// store longer than its busy timeout delays the run, and ends nothing.
func TestMeasureRidesOutALockedStore(t *testing.T) {
	cfg := &server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "doxlab.db")
	url := "udp://" + srv.Addr("udp").String()
	args := []string{"measure", "--store", db, "--transports", "udp", "--conditions", "fresh", "--repeat", "12", "--rate", "2", url}
	cmd, stderr := startWatched(t, args...)
	// Locked once the run is recorded (an open waits out no lock of 7 s),
	// with most of the 6 s of tasks (2/s) still to be stored.
	stderr.waitFor(t, "(continue it with:")
	time.Sleep(500 * time.Millisecond)
	// Hold the database for 7 s, past the store's 5 s busy timeout.
	lock, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	conn, err := lock.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE")
	require.NoError(t, err)
	time.Sleep(7 * time.Second)
	conn.ExecContext(context.Background(), "COMMIT")
	conn.Close()
	lock.Close()
	out := stderr.wait(t)
	require.NoError(t, cmd.Wait(), out)
	require.Contains(t, out, "trying again")
	code, out, errOut := run("export", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 12+1, strings.Count(out, "\n"), "every sample stored, once")
}

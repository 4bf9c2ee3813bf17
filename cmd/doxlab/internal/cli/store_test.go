package cli

import (
	"context"
	"database/sql"
	"encoding/csv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/reportcheck"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
)

// TestMeasureResumeAfterKill kills a stored measurement with SIGKILL and
// continues it: in the end every task is stored once, none twice, none lost.
func TestMeasureResumeAfterKill(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	db := filepath.Join(t.TempDir(), "doxlab.db")
	args := []string{"measure", "--store", db, "--ca", cd.Cert.CertFile, "--name", "example.test", "--repeat", "10", "--rate", "8",
		"--transports", "udp,tcp", "--conditions", "fresh", "--seed", "7", cd.UDP, cd.TCP}
	cmd := exec.Command(doxlabBinary(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	runID := regexp.MustCompile(`run (\S+)`).FindStringSubmatch(stderr.String())
	require.Len(t, runID, 2, stderr.String())

	count := func() int {
		code, out, errOut := run("export", "--store", db, "--run", runID[1])
		require.Equal(t, 0, code, errOut)
		rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		require.NoError(t, err)
		return len(rows) - 1
	}
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

// TestExperimentDNSRTT runs a small dns-rtt on the testbed with the real
// binary and checks every cell was measured and stored.
func TestExperimentDNSRTT(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	db := filepath.Join(t.TempDir(), "exp.db")
	out, err := exec.Command(doxlabBinary(t), "experiment", "dns-rtt", "--quick", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// 5 profiles × (udp, tcp fresh; dot, doh2, doh3, doq fresh and resumed; doh3, doq 0-RTT) × 3 lookups.
	require.Contains(t, string(out), "progress: 180/180 measurements", "plain progress lines off a terminal")
	for _, cell := range []string{`fiber\s+udp\s+fresh\s+3/3 `, `dsl\s+dot\s+resumed\s+3/3 `, `4g-medium\s+doq\s+0rtt\s+3/3 `} {
		require.Regexp(t, cell, string(out))
	}
	code, csvOut, _ := run("export", "--store", db)
	require.Equal(t, 0, code)
	require.Equal(t, 5*12*3+1, strings.Count(csvOut, "\n"), "every cell, and the header")
	require.Contains(t, csvOut, "experiment:dns-rtt,fiber")
}

func TestCampaignRun(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "c.yaml")
	db := filepath.Join(dir, "c.db")
	require.NoError(t, os.WriteFile(spec, []byte("name: test\ntargets: [\""+cd.UDP+"\", \""+cd.QUIC+"\"]\nconditions: [fresh, 0rtt]\nquery: {name: example.test}\nrepeat: 3\ntls: {ca: \""+cd.Cert.CertFile+"\"}\nstore: \""+db+"\"\n"), 0o644))
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
	require.Contains(t, errOut, "c.yaml:2: conditions:")
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
	require.NoError(t, os.WriteFile(spec, []byte("name: two\ntargets: [\""+cd.UDP+"\", \""+cd.QUIC+"\"]\nconditions: [fresh]\nquery: {name: example.test}\nrepeat: 2\n"+
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

// TestExperimentWebQuick runs a short web experiment with the real binary
// (Chromium in the testbed, DNS through the stub) and renders its report.
func TestExperimentWebQuick(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	if _, err := exec.LookPath("chromium"); err != nil {
		testutil.Missing(t, "chromium")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "web.db")
	out, err := exec.Command(doxlabBinary(t), "experiment", "web", "--quick", "--pages", "example,wiki", "--transports", "udp,doq", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// fiber and 4g × 2 pages × 2 transports × 1-RTT and 0-RTT × 2 loads.
	require.Contains(t, string(out), ": 32 page loads")
	for _, cell := range []string{"stub      fiber      example  udp   cold  1rtt   2/2 ", "stub      4g         wiki     doq   cold  0rtt   2/2 "} {
		require.Contains(t, string(out), cell)
	}
	require.Regexp(t, `[0-9.]+ measured page loads per minute`, string(out))
	// Resuming a finished experiment measures nothing again.
	id := regexp.MustCompile(`experiment (web-\S+),`).FindStringSubmatch(string(out))
	require.Len(t, id, 2)
	again, err := exec.Command(doxlabBinary(t), "experiment", "web", "--quick", "--pages", "example,wiki", "--transports", "udp,doq", "--store", db, "--resume", id[1]).CombinedOutput()
	require.NoError(t, err, "%s", again)
	require.Contains(t, string(again), ": 32 page loads")
	require.Contains(t, string(again), "per minute (each after a warm-up load): 0 in")
	code, stdout, errOut := run("report", "--store", db, "--out", filepath.Join(dir, "rep"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "32 page loads")
	html, err := os.ReadFile(filepath.Join(dir, "rep", "report.html"))
	require.NoError(t, err)
	for _, s := range []string{"Fig. 8", "Fig. 9", "Fig. 10-11", "Fig. 12", `id="web-cells"`} {
		require.Contains(t, string(html), s)
	}
	checkReport(t, filepath.Join(dir, "rep", "report.html"), "web", "links")
	require.FileExists(t, filepath.Join(dir, "rep", "fig8-stub-cold.svg"))
	require.FileExists(t, filepath.Join(dir, "rep", "fig8-stub-cold.csv"))
	code, csvOut, errOut := run("export", "--store", db, "--table", "loads")
	require.Equal(t, 0, code, errOut)
	records, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 33, "a header and every page load")
	require.Equal(t, "plt_ms", records[0][13])
	require.Equal(t, "engine", records[0][8])
	require.Equal(t, "chromium", records[1][8])
}

// TestExperimentsHOLAndAmplificationQuick runs short hol and amplification
// experiments with the real binary and renders both into one report.
func TestExperimentsHOLAndAmplificationQuick(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	dir := t.TempDir()
	db := filepath.Join(dir, "x.db")
	out, err := exec.Command(doxlabBinary(t), "experiment", "hol", "--quick", "--transports", "udp,dot-inorder,doq", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// profile, transport, baseline median, its interval (n), delayed, knock-on
	require.Regexp(t, `none\s+udp\s+[0-9.]+\s+\[[^\]]*\] \(\d+\)\s+4\s+0\s`, string(out), "UDP cannot block")
	require.Regexp(t, `none\s+dot-inorder\s+[0-9.]+\s+\[[^\]]*\] \(\d+\)\s+4\s+[1-9][0-9]*\s`, string(out), "an in-order DoT server blocks")
	require.Regexp(t, `(?m)^(links: 2 checks before and after the runs held|link check FAILED, run )`, string(out), "the link's check, whatever it found")
	out, err = exec.Command(doxlabBinary(t), "experiment", "amplification", "--quick", "--certs", "large", "--key-shares", "classic", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// ok/n, handshake RTTs, its interval, then total ms, the client's
	// first flight and the server's first burst, each with its interval
	require.Regexp(t, `large\s+\d+ classic\s+none\s+3/3\s+[0-9.]+\s+\S+\s+[0-9.]+ \S+\s+1280 \S+\s+3[89]\d\d \S+\s+100%`, string(out), "stalled at three times one Initial")
	require.Regexp(t, `large\s+\d+ classic\s+token\s+3/3 .* 0%\s+0%\s+100%`, string(out))
	code, stdout, errOut := run("report", "--store", db, "--out", filepath.Join(dir, "rep"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "240 head-of-line queries, 9 handshakes")
	html, err := os.ReadFile(filepath.Join(dir, "rep", "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), `id="hol-summary"`)
	require.Contains(t, string(html), `id="amp"`)
	checkReport(t, filepath.Join(dir, "rep", "report.html"), "hol", "amplification", "links")
	require.Contains(t, string(html), `id="link-checks"`, "each run's link, checked before and after")
	code, stdout, errOut = run("export", "--store", db, "--table", "results", "--kind", "link-check")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 4, strings.Count(stdout, `"emulator_own_process":true`), "each check says the emulator ran in its own process: %s", stdout)
}

// TestExperimentOverheadQuick resolves names over every transport in the
// testbed, attributes the capture to layers, and renders the report. It
// runs on a terminal (a pseudo-terminal made by util-linux's script), as
// a user would, and an experiment's progress bar is drawn there.
func TestExperimentOverheadQuick(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	script := testutil.Need(t, "script", "apt-get install bsdutils")
	dir := t.TempDir()
	db := filepath.Join(dir, "o.db")
	cmdline := strings.Join([]string{doxlabBinary(t), "experiment", "overhead", "--quick", "--key-share", "classic", "--keep", filepath.Join(dir, "cap"), "--store", db}, " ")
	raw, err := exec.Command(script, "-qefc", cmdline, "/dev/null").CombinedOutput()
	require.NoError(t, err, "%s", raw)
	require.Regexp(t, `\r\x1b\[K\[=* *\] \d+/\d+ \w+, [0-9.]+/(s|min), ETA `, string(raw), "a bar with the count, the rate and an ETA")
	out := strings.ReplaceAll(string(raw), "\r\n", "\n")
	// 10 names; new connections: one per name; persistent: 10 on one.
	for _, line := range []string{`small  new        udp      10 `, `small  persistent doq      10 `, `small  new        doh2     10 `} {
		require.Contains(t, string(out), line)
	}
	require.Regexp(t, `small  new        dot .* 0\n`, string(out), "nothing left undecrypted")
	require.FileExists(t, filepath.Join(dir, "cap", "keys.log"))
	code, stdout, errOut := run("report", "--store", db, "--out", filepath.Join(dir, "rep"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "captured connections")
	require.FileExists(t, filepath.Join(dir, "rep", "overhead-layers-small-new.svg"))
	checkReport(t, filepath.Join(dir, "rep", "report.html"), "overhead")
}

// checkReport opens a report in headless Chromium at a desktop and a
// laptop width: it has exactly these sections, a verdict for each finding,
// and every figure draws data, links it and reads cleanly (no text cut
// off or on other text, no two series alike), one column wide too.
func checkReport(t *testing.T, html string, sections ...string) {
	t.Helper()
	testutil.NeedChromium(t)
	pages, err := reportcheck.Open(context.Background(), html, t.TempDir(), 1440, 1024)
	require.NoError(t, err)
	for _, p := range pages {
		require.Equal(t, sections, p.Sections, "%d px", p.Width)
		require.NotEmpty(t, p.Findings, "each experiment states its findings")
		for _, v := range p.Findings {
			require.Contains(t, []string{"holds", "differs", "no data"}, v)
		}
		require.NotEmpty(t, p.Figures)
		for _, f := range p.Figures {
			require.Greater(t, f.Marks, 10, "%s draws its data", f.ID)
			require.False(t, f.NoData, "%s has an empty panel", f.ID)
			require.True(t, f.CSV, "%s links its data", f.ID)
			require.Empty(t, f.Legible.Problems, "%s at %d px", f.ID, p.Width)
		}
		require.False(t, p.Overflow, "no sideways scrolling at %d px", p.Width)
	}
	var cols []string
	for _, f := range pages[0].Figures {
		cols = append(cols, filepath.Join(filepath.Dir(html), f.ID+"-1col.svg"))
	}
	got, err := reportcheck.Files(context.Background(), cols...)
	require.NoError(t, err)
	for _, f := range cols {
		require.Empty(t, got[f].Problems, f)
	}
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
	code, out, errOut := run("scan", "--rate", "50", "--quic-ports", port, "--cooldown", "300ms", "--store", db, "127.0.0.1")
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
	cmd := exec.Command(doxlabBinary(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond)
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
	require.NoError(t, cmd.Wait(), stderr.String())
	require.Contains(t, stderr.String(), "trying again")
	code, out, errOut := run("export", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 12+1, strings.Count(out, "\n"), "every sample stored, once")
}

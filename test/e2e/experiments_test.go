package e2e

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestExperimentDNSRTT runs a small dns-rtt on the testbed with the real
// binary and checks every cell was measured and stored. Two of --quick's
// five profiles, the fastest and the slowest: all five (make demo's, and
// TestEveryExperimentOnLoopback's on loopback) took 80 s of the e2e lane
// for nothing more of what this checks.
func TestExperimentDNSRTT(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	t.Parallel() // on a testbed of its own, beside the other experiments
	db := filepath.Join(t.TempDir(), "exp.db")
	out, err := exec.Command(testutil.Doxlab(t), "experiment", "dns-rtt", "--quick", "--profiles", "fiber,4g-medium", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// 2 profiles × (udp, tcp fresh; dot, doh2, doh3, doq fresh and resumed; doh3, doq 0-RTT) × 3 lookups.
	require.Contains(t, string(out), "progress: 72/72 measurements", "plain progress lines off a terminal")
	for _, cell := range []string{`fiber\s+udp\s+fresh\s+3/3 `, `4g-medium\s+dot\s+resumed\s+3/3 `, `4g-medium\s+doq\s+0rtt\s+3/3 `} {
		require.Regexp(t, cell, string(out))
	}
	code, csvOut, _ := doxlab(t, "export", "--store", db)
	require.Equal(t, 0, code)
	require.Equal(t, 2*12*3+1, strings.Count(csvOut, "\n"), "every cell, and the header")
	require.Contains(t, csvOut, "experiment:dns-rtt,fiber")

	// The resume hint it printed works as printed, without --quick: a
	// resume reads the design from the store, and measures nothing again.
	hint := regexp.MustCompile(`continue it with: (doxlab [^\n)]*)`).FindStringSubmatch(string(out))
	require.Len(t, hint, 2, "%s", out)
	require.NotContains(t, hint[1], "--quick")
	again, err := exec.Command("sh", "-c", testutil.Doxlab(t)+strings.TrimPrefix(hint[1], "doxlab")).CombinedOutput()
	require.NoError(t, err, "%s", again)
	require.Contains(t, string(again), "progress: 72/72 measurements")
	require.Regexp(t, `fiber\s+udp\s+fresh\s+3/3 `, string(again))
}

// TestExperimentWebQuick runs a short web experiment with the real binary
// (Chromium in the testbed, DNS through the stub) and renders its report.
func TestExperimentWebQuick(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	t.Parallel() // on a testbed of its own, beside the other experiments
	if _, err := exec.LookPath("chromium"); err != nil {
		testutil.Missing(t, "chromium")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "web.db")
	out, err := exec.Command(testutil.Doxlab(t), "experiment", "web", "--quick", "--pages", "example,wiki", "--transports", "udp,doq", "--repeat", "2", "--store", db).CombinedOutput()
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
	again, err := exec.Command(testutil.Doxlab(t), "experiment", "web", "--quick", "--pages", "example,wiki", "--transports", "udp,doq", "--repeat", "2", "--store", db, "--resume", id[1]).CombinedOutput()
	require.NoError(t, err, "%s", again)
	require.Contains(t, string(again), ": 32 page loads")
	require.Contains(t, string(again), "per minute (each after a warm-up load): 0 in")
	code, stdout, errOut := doxlab(t, "report", "--store", db, "--out", filepath.Join(dir, "rep"))
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
	code, csvOut, errOut := doxlab(t, "export", "--store", db, "--table", "loads")
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
	// Not beside the others: a stall is a pause of most of an RTT, and
	// a busy machine's pauses would pass for one.
	dir := t.TempDir()
	db := filepath.Join(dir, "x.db")
	out, err := exec.Command(testutil.Doxlab(t), "experiment", "hol", "--quick", "--transports", "udp,dot-inorder,doq", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// profile, transport, baseline median, its interval (n), delayed, knock-on
	require.Regexp(t, `none\s+udp\s+[0-9.]+\s+\[[^\]]*\] \(\d+\)\s+4\s+0\s`, string(out), "UDP cannot block")
	require.Regexp(t, `none\s+dot-inorder\s+[0-9.]+\s+\[[^\]]*\] \(\d+\)\s+4\s+[1-9][0-9]*\s`, string(out), "an in-order DoT server blocks")
	require.Regexp(t, `(?m)^(links: 2 checks before and after the runs held|link check FAILED, run )`, string(out), "the link's check, whatever it found")
	out, err = exec.Command(testutil.Doxlab(t), "experiment", "amplification", "--quick", "--certs", "large", "--key-shares", "classic", "--repeat", "3", "--store", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// ok/n, handshake RTTs, its interval, then total ms, the client's
	// first flight, the server's first burst and its wait, each with its
	// interval
	require.Regexp(t, `large\s+\d+ classic\s+none\s+3/3\s+[0-9.]+\s+\S+\s+[0-9.]+ \S+\s+1280 \S+\s+3[89]\d\d \S+\s+[0-9.]+ \S+\s+100%`, string(out), "stalled at three times one Initial")
	require.Regexp(t, `large\s+\d+ classic\s+token\s+3/3 .* 0%\s+0%\s+100%`, string(out))
	code, stdout, errOut := doxlab(t, "report", "--store", db, "--out", filepath.Join(dir, "rep"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "240 head-of-line queries, 9 handshakes")
	html, err := os.ReadFile(filepath.Join(dir, "rep", "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), `id="hol-summary"`)
	require.Contains(t, string(html), `id="amp"`)
	checkReport(t, filepath.Join(dir, "rep", "report.html"), "hol", "amplification", "links")
	require.Contains(t, string(html), `id="link-checks"`, "each run's link, checked before and after")
	code, stdout, errOut = doxlab(t, "export", "--store", db, "--table", "results", "--kind", "link-check")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 4, strings.Count(stdout, `"emulator_own_process":true`), "each check says the emulator ran in its own process: %s", stdout)
}

// TestExperimentOverheadQuick resolves names over every transport in the
// testbed, attributes the capture to layers, and renders the report. It
// runs on a terminal (a pseudo-terminal made by util-linux's script), as
// a user would, and an experiment's progress bar is drawn there.
func TestExperimentOverheadQuick(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	t.Parallel() // on a testbed of its own, beside the other experiments
	script := testutil.Need(t, "script", "apt-get install bsdutils")
	dir := t.TempDir()
	db := filepath.Join(dir, "o.db")
	cmdline := strings.Join([]string{testutil.Doxlab(t), "experiment", "overhead", "--quick", "--key-share", "classic", "--keep", filepath.Join(dir, "cap"), "--store", db}, " ")
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
	code, stdout, errOut := doxlab(t, "report", "--store", db, "--out", filepath.Join(dir, "rep"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "captured connections")
	require.FileExists(t, filepath.Join(dir, "rep", "overhead-layers-small-new.svg"))
	checkReport(t, filepath.Join(dir, "rep", "report.html"), "overhead")
}

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
)

// startServe runs 'doxlab serve' with args until the test ends and
// returns its listeners once every one is bound.
func startServe(t *testing.T, args ...string) server.Ready {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testutil.Doxlab(t), append([]string{"serve", "--ready", filepath.Join(dir, "ready.json")}, args...)...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var ready server.Ready
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "ready.json"))
		return err == nil && json.Unmarshal(b, &ready) == nil
	}, 10*time.Second, 10*time.Millisecond, "serve wrote no ready file")
	return ready
}

func TestMeasureExitsNonZeroWhenEveryTaskFailed(t *testing.T) {
	nothing := fmt.Sprintf("udp://127.0.0.1:%d", testutil.FreePort(t))
	code, out, errOut := run("measure", "--timeout", "500ms", "--repeat", "2", nothing)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "every one of the 2 measured tasks failed")
	require.Contains(t, out, "answered 0/2; refused 2")
	require.Contains(t, out, "0/2", "the cell counts what answered")
	require.NotContains(t, out, "1000.", "a failed sample's time is never printed as a timing")
}

// TestRefusedAnswersAreFailures: a resolver that answers REFUSED to
// everything answered nothing: no timing, exit 1, in measure's table and
// in the report; --ok-rcodes takes them as answers where asked.
func TestRefusedAnswersAreFailures(t *testing.T) {
	refusing := startServe(t, "--udp", "127.0.0.1:0") // no answers: REFUSED
	url := "udp://" + refusing.Listeners["udp"]
	dsn := filepath.Join(t.TempDir(), "s.db")
	code, out, errOut := run("measure", "--store", dsn, "--conditions", "fresh", "--repeat", "6", url)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, out, "answered 0/6; REFUSED 6")
	require.Regexp(t, `udp +fresh +0/6 +– +– +– +– `, out, "no median of refusals")
	require.Contains(t, errOut, "nothing answered with NOERROR or NXDOMAIN")

	code, out, errOut = run("report", "--store", dsn, "--json")
	require.Equal(t, 0, code, errOut)
	var sum struct {
		Cells []struct {
			Table, Metric string
			Samples, N    int
			Median        *float64
			Failed        map[string]int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	found := false
	for _, c := range sum.Cells {
		if c.Table == "dns" && c.Metric == "total_ms" {
			found = true
			require.Nil(t, c.Median, "no median of refusals")
			require.Equal(t, 6, c.Samples)
			require.Zero(t, c.N)
			require.Equal(t, map[string]int{"REFUSED": 6}, c.Failed)
		}
	}
	require.True(t, found, out)
	dir := t.TempDir()
	code, _, errOut = run("report", "--store", dsn, "--out", dir)
	require.Equal(t, 0, code, errOut)
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), `<td>0/6</td>`)
	require.Contains(t, string(html), `<td class="l">REFUSED 6</td>`)

	// Taken as answers where the user says so, in measure and report.
	code, out, errOut = run("measure", "--ok-rcodes", "noerror,REFUSED", "--conditions", "fresh", "--repeat", "3", url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "answered 3/3")
	code, out, errOut = run("report", "--store", dsn, "--json", "--ok-rcodes", "REFUSED")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, `"REFUSED"`)
	require.Contains(t, out, `"median": `)
	code, _, errOut = run("report", "--store", dsn, "--ok-rcodes", "REFUZED")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--ok-rcodes: "REFUZED" is not an rcode`)
}

// TestMeasureKeepsResolversApart: a fast and a slow resolver are two rows,
// not one pooled median.
func TestMeasureKeepsResolversApart(t *testing.T) {
	testutil.Timed(t)
	fast := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	slow := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1", "--delay", "30ms")
	fastURL, slowURL := "udp://"+fast.Listeners["udp"], "udp://"+slow.Listeners["udp"]
	dir := t.TempDir()
	dsn := filepath.Join(dir, "s.db")
	code, out, errOut := run("measure", "--store", dsn, "--conditions", "fresh", "--repeat", "6", fastURL, slowURL)
	require.Equal(t, 0, code, errOut)
	medians := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && (f[0] == fastURL || f[0] == slowURL) {
			require.Equal(t, "6/6", f[3], line)
			v, err := strconv.ParseFloat(f[7], 64) // total_ms
			require.NoError(t, err, line)
			medians[f[0]] = v
		}
	}
	require.Len(t, medians, 2, out)
	require.Less(t, medians[fastURL], 25.0, out)
	require.GreaterOrEqual(t, medians[slowURL], 30.0, out)
	require.Contains(t, out, "answered 12/12")

	// The report ranks them, the slow one significantly behind.
	code, _, errOut = run("report", "--store", dsn, "--out", dir)
	require.Equal(t, 0, code, errOut)
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	page := string(html)
	require.Contains(t, page, `id="resolvers"`)
	require.Contains(t, page, `id="cdf-total-by-resolver"`)
	// Rows go by resolver (here by port), each with its rank.
	i, j := strings.Index(page, "<td>1</td><td class=\"l\">"+fastURL), strings.Index(page, "<td>2</td><td class=\"l\">"+slowURL)
	require.True(t, i > 0 && j > 0, "fast ranked first, slow second")
	slowRow, _, _ := strings.Cut(page[j:], "</tr>")
	require.Regexp(t, `<td class="l">&#43;[0-9.]+ % \(p=[0-9.]+ n=6&#43;6\)</td>`, slowRow, "the slow one apart from the fastest (html/template writes + as &#43;)")

	// So does the JSON summary.
	code, out, errOut = run("report", "--store", dsn, "--json")
	require.Equal(t, 0, code, errOut)
	var sum struct {
		Cells []struct {
			Table, Metric string
			Keys          map[string]string
			Rank          int
			Median        float64
			Significant   *bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	ranks := map[string]int{}
	for _, c := range sum.Cells {
		if c.Table == "resolvers" && c.Metric == "total_ms" {
			ranks[c.Keys["resolver"]] = c.Rank
			if c.Rank == 2 {
				require.True(t, *c.Significant)
				require.GreaterOrEqual(t, c.Median, 30.0)
			}
		}
	}
	require.Equal(t, map[string]int{fastURL: 1, slowURL: 2}, ranks)
}

// TestRunIDsAreExact: a mistyped or unknown ID measures, reports and
// exports nothing, and names the IDs the store does hold.
func TestRunIDsAreExact(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "s.db")
	srv := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	code, _, errOut := run("measure", "--store", dsn, "--conditions", "fresh", "--transports", "udp", "udp://"+srv.Listeners["udp"])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "continue it with: doxlab measure --store ")
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	st.Close()
	require.Len(t, runs, 1)
	id := runs[0].ID

	for _, args := range [][]string{
		{"measure", "--store", dsn, "--run", id[:len(id)-1], "udp://" + srv.Listeners["udp"]},
		{"report", "--store", dsn, "--run", id[:len(id)-1], "--out", t.TempDir()},
		{"export", "--store", dsn, "--run", id + "x"},
	} {
		code, out, errOut := run(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "the closest it holds: "+id, args)
		require.Empty(t, out, args)
	}
	st, err = store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	rows, err := st.Rows(ctx, "")
	require.NoError(t, err)
	require.Len(t, rows, 1, "nothing measured again")

	// An experiment resumed by an unknown ID fails before its testbed.
	code, _, errOut = run("experiment", "dns-rtt", "--store", dsn, "--resume", "dnsrtt-nosuch")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, `no experiment "dnsrtt-nosuch"`)
	after, err := st.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, after, 1, "no run begun")
}

// TestStatisticsAgreeWithNumpyOnTheExport: the medians and quantiles
// 'report --json' prints equal numpy's (linear, type 7) over 'export' of
// the same store, per resolver, transport and condition, to 1e-9.
func TestStatisticsAgreeWithNumpyOnTheExport(t *testing.T) {
	py := testutil.Need(t, "python3", "apt-get install python3")
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		testutil.Missing(t, "numpy not found; install it with: pip install numpy (or run bash .ci/run)")
	}
	dir := t.TempDir()
	dsn := filepath.Join(dir, "s.db")
	fast := startServe(t, "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--any", "192.0.2.1")
	slow := startServe(t, "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--any", "192.0.2.1", "--delay", "3ms")
	var targets []string
	for _, s := range []server.Ready{fast, slow} {
		targets = append(targets, "udp://"+s.Listeners["udp"], "tcp://"+s.Listeners["tcp"])
	}
	code, _, errOut := run(append([]string{"measure", "--store", dsn, "--conditions", "fresh", "--repeat", "8"}, targets...)...)
	require.Equal(t, 0, code, errOut)
	csv := filepath.Join(dir, "samples.csv")
	code, _, errOut = run("export", "--store", dsn, "--out", csv)
	require.Equal(t, 0, code, errOut)
	code, out, errOut := run("report", "--store", dsn, "--json")
	require.Equal(t, 0, code, errOut)
	sum := summaryCells(t, out)
	want := numpyGroups(t, py, csv, "total_ms", "target", "transport", "condition")
	require.Len(t, want, 4)
	seen := 0
	for _, c := range sum.Cells {
		if c.Table != "resolvers" || c.Metric != "total_ms" {
			continue
		}
		w, ok := want[c.Keys["resolver"]+"|"+c.Keys["transport"]+"|"+c.Keys["condition"]]
		require.True(t, ok, "%v", c.Keys)
		require.Equal(t, int(w[0]), c.N, "%v", c.Keys)
		for i, got := range []float64{c.Median, c.P25, c.P75, c.P95} {
			require.InDelta(t, w[i+1], got, 1e-9, "%v, statistic %d", c.Keys, i)
		}
		seen++
	}
	require.Equal(t, 4, seen, "both resolvers over both transports, apart")
}

// TestInterruptedMeasureSaysHowToContinue: SIGINT ends a measurement
// with the exact command that continues it, and that command measures
// only what is left.
func TestInterruptedMeasureSaysHowToContinue(t *testing.T) {
	srv := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	dir := t.TempDir()
	dsn := filepath.Join(dir, "s.db")
	args := []string{"measure", "--store", dsn, "--conditions", "fresh", "--repeat", "40", "--rate", "20", "udp://" + srv.Listeners["udp"]}
	cmd, stderr := startWatched(t, args...)
	// The run is recorded before the first task, which a slow disk can
	// delay past any fixed sleep; a few tasks in (20/s), it is stopped.
	stderr.waitFor(t, "(continue it with:")
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	out := stderr.wait(t)
	require.Error(t, cmd.Wait(), "an interrupted run exits non-zero")
	require.NotContains(t, out, "samples stored before it are kept", "an interrupt is no store error")
	line := regexp.MustCompile(`continue with: doxlab (measure .* --run [^\s)]+)`).FindStringSubmatch(out)
	require.Len(t, line, 2, out)
	code, _, errOut := run(strings.Fields(line[1])...)
	require.Equal(t, 0, code, errOut)
	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	rows, err := st.Rows(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, rows, 40, "each task once: the first run's and the rest")
}

// TestInterruptedBeforeMeasuring: SIGINT while the store is still
// opening (a PostgreSQL server that accepts and never answers) ends the
// command at once, saying nothing was measured, not as a usage error.
func TestInterruptedBeforeMeasuring(t *testing.T) {
	srv := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	dsn := "postgres://doxlab@" + ln.Addr().String() + "/doxlab?sslmode=disable"
	cmd, stderr := startWatched(t, "measure", "--store", dsn, "--conditions", "fresh", "udp://"+srv.Listeners["udp"])
	select {
	case c := <-accepted: // the store is opening: the signal handler is set
		defer c.Close()
	case <-time.After(time.Minute):
		t.Fatalf("doxlab never connected to the store: %s", stderr.wait(t))
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	out := stderr.wait(t)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out)
	require.Equal(t, 1, exit.ExitCode(), out)
	require.Contains(t, out, "doxlab measure: stopped (context canceled) before measuring; nothing new was stored", out)
}

// watched collects a child's stderr and lets a test wait for a line.
type watched struct {
	mu   sync.Mutex
	buf  strings.Builder
	seen chan struct{} // a line arrived
	eof  chan struct{} // the child closed its stderr
}

// startWatched starts doxlab with args, its stderr watched.
func startWatched(t *testing.T, args ...string) (*exec.Cmd, *watched) {
	t.Helper()
	cmd := exec.Command(testutil.Doxlab(t), args...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	w := &watched{seen: make(chan struct{}, 1), eof: make(chan struct{})}
	go func() {
		defer close(w.eof)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			w.mu.Lock()
			w.buf.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			select {
			case w.seen <- struct{}{}:
			default:
			}
		}
	}()
	return cmd, w
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor returns once stderr holds s; it fails the test if the child
// ends, or a minute passes, first.
func (w *watched) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(w.String(), s) {
		select {
		case <-w.seen:
		case <-w.eof:
			if !strings.Contains(w.String(), s) {
				t.Fatalf("doxlab ended before printing %q: %s", s, w.String())
			}
		case <-deadline:
			t.Fatalf("no %q within a minute: %s", s, w.String())
		}
	}
}

// wait returns the whole of stderr once the child closed it.
func (w *watched) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-w.eof:
	case <-time.After(time.Minute):
		t.Fatalf("doxlab still running after a minute: %s", w.String())
	}
	return w.String()
}

// TestProgressOnATerminal: on a terminal (a pseudo-terminal made by
// util-linux's script), measure draws a bar redrawn in place with the
// count, the rate and an ETA.
func TestProgressOnATerminal(t *testing.T) {
	script := testutil.Need(t, "script", "apt-get install bsdutils")
	srv := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	cmdline := testutil.Doxlab(t) + " measure --conditions fresh --repeat 30 --rate 60 udp://" + srv.Listeners["udp"]
	out, err := exec.Command(script, "-qefc", cmdline, "/dev/null").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `\r\x1b\[K\[=+ *\] \d+/30 tasks, [0-9.]+/s, ETA \d+`, string(out))
	require.Contains(t, string(out), "] 30/30 tasks")
}

// TestReportCompare: two runs in two stores set against each other, as
// printed, as JSON and as a page; and what --compare refuses.
func TestReportCompare(t *testing.T) {
	srv := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	dir := t.TempDir()
	var ids []string
	for _, db := range []string{"a.db", "b.db"} {
		code, _, errOut := run("measure", "--store", filepath.Join(dir, db), "--conditions", "fresh", "--repeat", "6", "udp://"+srv.Listeners["udp"])
		require.Equal(t, 0, code, errOut)
		id := regexp.MustCompile(`stored in run (\S+);`).FindStringSubmatch(errOut)
		require.Len(t, id, 2, errOut)
		ids = append(ids, id[1])
	}
	a, b := ids[0]+"@"+filepath.Join(dir, "a.db"), ids[1]+"@"+filepath.Join(dir, "b.db")
	code, out, errOut := run("report", "--compare", "--out", filepath.Join(dir, "rep"), a, b)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "A: "+ids[0])
	require.Regexp(t, `udp://\S+\s+DoUDP\s+fresh\s+\S+ \[\S+, \S+\] 6/6\s+\S+ \[\S+, \S+\] 6/6\s+(~|[+-][0-9.]+ %) \(p=`, out)
	require.FileExists(t, filepath.Join(dir, "rep", "cdf-compare.svg"))

	code, out, errOut = run("report", "--compare", "--json", a, b)
	require.Equal(t, 0, code, errOut)
	var sum struct {
		Cells []struct {
			Table    string
			Keys     map[string]string
			P        *float64
			Baseline string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Len(t, sum.Cells, 2)
	require.Equal(t, ids[0], sum.Cells[1].Baseline)
	require.NotNil(t, sum.Cells[1].P)

	for args, msg := range map[string]string{
		"--compare " + a: "--compare wants two runs or more",
		"--compare " + a + " nosuch@" + dir + "/b.db": `no run or experiment "nosuch"`,
		"--compare " + a + " x@" + dir + "/none.db":   "no store at",
		"--by week --run x":                           `--by "week": only round is known`,
		"--by round":                                  "--by round needs --run",
		ids[0]:                                        "unexpected argument",
		// An empty ID selected every run of its store; an empty store,
		// --store's unsaid; a run twice was compared with itself.
		"--compare " + a + " @" + dir + "/b.db": `"@` + dir + `/b.db": want a run or experiment ID`,
		"--compare " + a + " " + ids[1] + "@":   "want a store after the @",
		"--compare " + a + " " + a:              a + " is named twice",
		// The same file, spelled another way.
		"--compare " + a + " " + ids[0] + "@" + dir + "/./a.db": ids[0] + "@" + dir + "/./a.db is named twice",
	} {
		code, _, errOut := run(append([]string{"report"}, strings.Fields(args)...)...)
		require.Equal(t, 2, code, args)
		require.Contains(t, errOut, msg, args)
	}
}

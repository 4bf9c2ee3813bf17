package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/server"
)

// TestBench loads doxlab's server briefly over UDP, reads the JSON
// summary, and refuses careless input with one line.
func TestBench(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	names := filepath.Join(t.TempDir(), "q.txt")
	require.NoError(t, os.WriteFile(names, []byte("# a mix\na.example A\nb.example AAAA\nc.example\n"), 0o644))
	url := "udp://" + srv.Addr("udp").String()
	code, out, errOut := run("bench", "--rate", "500", "--duration", "1s", "--names", names, "--json", url)
	require.Equal(t, 0, code, errOut)
	var s bench.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, "open-loop", s.Mode)
	require.Equal(t, 500, s.Sent)
	require.Equal(t, 500, s.Answered)
	require.Positive(t, s.Latency.P["99"])

	// Steps: a generous bound holds both rates.
	code, out, errOut = run("bench", "--steps", "100,200", "--duration", "500ms", "--p99", "2s", url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "highest rate held: 200 queries/s")
	require.Regexp(t, `(?m)^\s+200\s+\d+\s+\d+\s+0\s+0\s+[\d.]+\s+[\d.]+\s+true$`, out, "nothing lost, nothing unsent")

	// Stored: every query of every step, drawn by the report.
	db := filepath.Join(t.TempDir(), "b.db")
	code, _, errOut = run("bench", "--store", db, "--steps", "100,200", "--duration", "500ms", "--p99", "2s", "--label", "mine", url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "stored as run ")
	rep := filepath.Join(t.TempDir(), "rep")
	code, out, errOut = run("report", "--store", db, "--out", rep)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "2 benchmarks")
	html, err := os.ReadFile(filepath.Join(rep, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), "mine @200/s")
	require.FileExists(t, filepath.Join(rep, "server-load-spectrum.svg"))
	code, _, errOut = run("bench", "--store", "postgres://nobody@127.0.0.1:1/x", url)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "unreachable")

	bad := filepath.Join(t.TempDir(), "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte("a.example A\nb.example NOPE\n"), 0o644))
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--policy", "sometimes", url}, `--policy: unknown connection policy "sometimes"`},
		{[]string{"--names", bad, url}, `bad.txt:2: unknown type "NOPE"`},
		{[]string{"--rate", "-1", url}, "rate must be a number, 0 or more"},
		{[]string{"--rate", "NaN", url}, "rate must be a number, 0 or more"},
		{[]string{"--duration", "0s", url}, "--duration and --timeout must be positive"},
		{[]string{"--conns", "-2", url}, "conns must not be negative"},
		{[]string{"--max-queries", "-1", url}, "max-queries must not be negative"},
		{[]string{"--ramp", "100:400", "--max-loss", "1.5", url}, "--max-loss: the loss a rate may have is a share from 0 up to 1, not 1.5"},
		{[]string{"--steps", "100", "--p99", "-1ms", url}, "the p99 latency bound must be positive"},
		{[]string{"ftp://x"}, "ftp"},
		{[]string{"--steps", "100,fast", url}, `--steps: "fast" is not a rate from above 0 to 10000000`},
		{[]string{"--ramp", "1e-300:1e6", url}, "--ramp: 1e-300:1e6 doubles in 1017 steps, more than 32"},
		{[]string{"--ramp", "900:100", url}, "--ramp: want START:LIMIT"},
		{[]string{"--steps", "100", "--ramp", "1:2", url}, "exclude each other"},
	} {
		code, _, errOut := run(append([]string{"bench"}, c.args...)...)
		require.Equal(t, exitUsage, code, c.args)
		require.Contains(t, errOut, c.msg)
	}
}

// TestBenchProgress: --progress reports a running benchmark once a
// second on standard error, which here is no terminal: plain lines, the
// time and the queries sent growing, nothing failed against a server
// that answers all; without it, a log that is no terminal gets none.
func TestBenchProgress(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	url := "udp://" + srv.Addr("udp").String()
	code, _, errOut := run("bench", "--rate", "200", "--duration", "2200ms", "--progress", url)
	require.Equal(t, 0, code, errOut)
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(url) + `\s+([\d.]+)s: (\d+) sent, (\d+) answered, 0 failed, \d+ in flight; [\d.]+ answers/s, p50 [\d.]+ ms, p99 [\d.]+ ms$`)
	lines := line.FindAllStringSubmatch(errOut, -1)
	require.GreaterOrEqual(t, len(lines), 2, "a line a second: %s", errOut)
	require.NotContains(t, errOut, "\x1b[", "no terminal: nothing redrawn")
	var lastT float64
	lastSent := -1
	for _, m := range lines {
		at, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		sent, _ := strconv.Atoi(m[2])
		require.Greater(t, at, lastT, m[0])
		require.Greater(t, sent, lastSent, m[0])
		lastT, lastSent = at, sent
	}
	code, _, errOut = run("bench", "--rate", "200", "--duration", "1200ms", url)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, line.FindAllString(errOut, -1), "no progress unless asked, off a terminal")
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
)

func TestServeBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("listen:\n  udpp: 127.0.0.1:53\n"), 0o644))
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve", "--config", bad}, "bad.yaml:2: listen.udpp: unknown field (did you mean udp?)"},
		{[]string{"serve", "--config", filepath.Join(dir, "none.yaml")}, "reading config"},
		{[]string{"serve", "--udp", "127.0.0.1:0", "--retry", "maybe"}, "quic.retry"},
		{[]string{"serve", "--udp", "127.0.0.1:0", "--zone", filepath.Join(dir, "none.zone")}, "answers.zone"},
		{[]string{"serve", "--udp", "127.0.0.1:0", "--forward", "gopher://x"}, "unknown scheme"},
		{[]string{"serve", "--web", "127.0.0.1:0", "--site", filepath.Join(dir, "nodir")}, "is not a directory"},
	} {
		code, _, errOut := run(c.args...)
		require.Equal(t, 2, code, errOut)
		require.Contains(t, errOut, c.msg)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	}
}

// TestServeBinary runs the real binary: it serves, answers doxlab's client,
// writes records, and exits 0 on SIGTERM.
func TestServeBinary(t *testing.T) {
	dir := t.TempDir()
	bin := testutil.Doxlab(t)
	udp, doq := testutil.FreePort(t), testutil.FreePort(t)
	certFile, records := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "records.jsonl")
	cmd := exec.Command(bin, "serve", "--udp", fmt.Sprintf("127.0.0.1:%d", udp), "--doq", fmt.Sprintf("127.0.0.1:%d", doq),
		"--any", "192.0.2.9", "--cert-out", certFile, "--records", records, "--ready", filepath.Join(dir, "ready.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	// --ready: the listeners and SPKI as JSON, once every listener is bound.
	ready := waitReady(t, filepath.Join(dir, "ready.json"))
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", udp), ready.Listeners["udp"])
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", doq), ready.Listeners["doq"])
	require.NotEmpty(t, ready.SPKI)
	code, _, errOut := run("query", "--timeout", "2s", fmt.Sprintf("udp://127.0.0.1:%d", udp), "x.example")
	require.Equal(t, 0, code, errOut)
	var stdout string
	code, stdout, errOut = run("query", "--ca", certFile, "--json", fmt.Sprintf("quic://127.0.0.1:%d", doq), "x.example")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "192.0.2.9")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), stderr.String())
	require.Contains(t, stderr.String(), "certificate SPKI")
	b, err := os.ReadFile(records)
	require.NoError(t, err)
	require.Contains(t, string(b), `"transport":"doq"`)
}

// TestServeExitsOnEOF: with --exit-on-eof the server stops, exit 0, when
// the program that started it closes its stdin or dies.
func TestServeExitsOnEOF(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(testutil.Doxlab(t), "serve", "--udp", "127.0.0.1:0", "--ready", filepath.Join(dir, "ready.json"), "--exit-on-eof")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready.json"))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("exited with stdin open: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	stdin.Close()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("still serving 10 s after its stdin closed")
	}
}

// TestServeFlagsOverrideTheConfig: a config of limits alone plus a
// listener flag serves, as the help says flags override the file (it
// said "no listener configured").
func TestServeFlagsOverrideTheConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("limits:\n  max_conns: 10\n"), 0o644))
	ready := startServe(t, "--config", cfg, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	require.Len(t, ready.Listeners, 1)
	code, out, errOut := run("query", "udp://"+ready.Listeners["udp"], "x.example")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "192.0.2.1")
}

// TestServeOnStandardPorts: with --standard-ports a default serve is
// reached by URLs without a port, the first thing a newcomer types.
func TestServeOnStandardPorts(t *testing.T) {
	testutil.NeedRoot(t, "ports below 1024 need root")
	dir := t.TempDir()
	certFile := filepath.Join(dir, "cert.pem")
	cmd := exec.Command(testutil.Doxlab(t), "serve", "--standard-ports", "--any", "192.0.2.9", "--cert-out", certFile, "--ready", filepath.Join(dir, "ready.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	ready := waitReady(t, filepath.Join(dir, "ready.json"))
	require.Equal(t, map[string]string{"udp": "127.0.0.1:53", "tcp": "127.0.0.1:53", "dot": "127.0.0.1:853", "doq": "127.0.0.1:853", "doh": "127.0.0.1:443", "doh3": "127.0.0.1:443"}, ready.Listeners)
	for _, url := range []string{"udp://127.0.0.1", "tls://127.0.0.1", "quic://127.0.0.1", "https://127.0.0.1/dns-query", "h3://127.0.0.1/dns-query"} {
		code, stdout, errOut := run("query", "--ca", certFile, url, "x.example")
		require.Equal(t, 0, code, "%s: %s", url, errOut)
		require.Contains(t, stdout, "192.0.2.9", url)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), stderr.String())
}

// waitReady reads the file serve --ready writes once every listener is
// bound (stderr is read once serve has exited).
func waitReady(t *testing.T, path string) server.Ready {
	t.Helper()
	var ready server.Ready
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &ready) == nil
	}, 10*time.Second, 10*time.Millisecond, "serve wrote no ready file")
	return ready
}

// serveSaying starts the binary's serve with args, and returns what it
// printed once every listener was bound, a line a listener, and the
// certificate file it wrote.
func serveSaying(t *testing.T, args ...string) (said map[string]string, answers, certFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile = filepath.Join(dir, "cert.pem")
	errFile, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	defer errFile.Close()
	cmd := exec.Command(testutil.Doxlab(t), append([]string{"serve", "--cert-out", certFile, "--ready", filepath.Join(dir, "ready.json")}, args...)...)
	cmd.Stderr = errFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitReady(t, filepath.Join(dir, "ready.json"))
	b, err := os.ReadFile(errFile.Name()) // written before the ready file
	require.NoError(t, err)
	said = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		rest, ok := strings.CutPrefix(line, "doxlab serve: ")
		require.True(t, ok, "every line says whose it is: %q", line)
		if a, ok := strings.CutPrefix(rest, "answers: "); ok {
			answers = a
			continue
		}
		if f := strings.Fields(rest); len(f) >= 3 && slices.Contains(server.ListenerNames, f[0]) {
			said[f[0]] = strings.Join(f[2:], " ")
		}
	}
	return said, answers, certFile
}

// TestServePrintsURLsThatWork: every URL serve prints for a listener
// reaches it with doxlab query as printed (the web listener's DoH/3
// too), and the metrics URL answers; what it says it answers with is
// what it answers.
func TestServePrintsURLsThatWork(t *testing.T) {
	lo := "127.0.0.1:0"
	said, answers, certFile := serveSaying(t, "--udp", lo, "--tcp", lo, "--dot", lo, "--doh", lo, "--doh3", lo, "--doq", lo,
		"--web", lo, "--metrics", lo, "--any", "192.0.2.7", "--record", "s.example. 60 IN A 192.0.2.8")
	require.Equal(t, "1 static records; any other name with 192.0.2.7", answers)
	require.Len(t, said, 8, "%v", said)
	urls := []string{}
	for _, name := range []string{"udp", "tcp", "dot", "doh", "doh3", "doq"} {
		urls = append(urls, said[name])
	}
	web := said["web"]
	require.True(t, strings.HasPrefix(web, "https://127.0.0.1:"), web)
	_, h3, ok := strings.Cut(strings.TrimSuffix(web, ")"), "DoH/3 at ")
	require.True(t, ok, web)
	urls = append(urls, h3)
	for _, url := range urls {
		for name, want := range map[string]string{"x.example": "192.0.2.7", "s.example": "192.0.2.8"} {
			code, out, errOut := run("query", "--ca", certFile, "--timeout", "5s", url, name)
			require.Equal(t, 0, code, "%s: %s", url, errOut)
			require.Contains(t, out, want, "%s %s", url, name)
		}
	}
	resp, err := http.Get(said["metrics"])
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "doxlab_", "Prometheus metrics of doxlab's own")
}

// TestServeWithoutAnswersSaysItRefuses: a server given nothing to
// answer with says so, and how to give it something, and refuses as it
// says.
func TestServeWithoutAnswersSaysItRefuses(t *testing.T) {
	said, answers, _ := serveSaying(t, "--udp", "127.0.0.1:0")
	require.Equal(t, "none configured: every query is answered REFUSED (add --any IP, --zone FILE, --hosts FILE or --forward URL)", answers)
	code, out, errOut := run("query", "--timeout", "5s", said["udp"], "x.example")
	require.Equal(t, 0, code, "an answer, whatever its rcode, as dig: %s", errOut)
	require.Contains(t, out, "status rcode-error  rcode REFUSED")
}

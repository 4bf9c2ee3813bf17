package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// get follows a dotted key such as "timing.handshake_ms".
func get(m map[string]any, key string) (any, bool) {
	var v any = m
	for _, k := range strings.Split(key, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// The keys scripts may rely on (issue #2).
var contractKeys = []string{"url", "protocol", "status", "rcode", "answers", "timing.handshake_ms", "timing.query_ms",
	"timing.total_ms", "conn.reused", "conn.tls_resumed", "conn.used_0rtt", "conn.alpn", "conn.tls_version",
	"conn.quic_version", "bytes.sent", "bytes.received"}

func TestQueryJSONContract(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	for _, url := range []string{cd.UDP, cd.TCP, cd.TLS, cd.HTTPS, cd.H3, cd.QUIC} {
		code, out, errOut := run("query", "--json", "--ca", cd.Cert.CertFile, url, "example.test", "A")
		require.Equal(t, 0, code, errOut)
		recs := jsonLines(t, out)
		require.Len(t, recs, 1)
		for _, k := range contractKeys {
			_, ok := get(recs[0], k)
			require.True(t, ok, "%s: key %s missing in %s", url, k, out)
		}
		require.Equal(t, "ok", recs[0]["status"])
	}
}

func TestQueryZeroRTTWithWarmup(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	code, out, errOut := run("query", "--ca", cd.Cert.CertFile, "--json", "--warmup", "--0rtt", "--repeat", "2", cd.QUIC, "example.test")
	require.Equal(t, 0, code, errOut)
	recs := jsonLines(t, out)
	require.Len(t, recs, 3)
	require.Equal(t, true, recs[0]["warmup"])
	for _, r := range recs[1:] {
		v, _ := get(r, "conn.used_0rtt")
		require.Equal(t, true, v, "after a warm-up every measured query rides in 0-RTT")
		v, _ = get(r, "conn.token_used")
		require.Equal(t, true, v)
	}
}

func TestQueryHumanOutput(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	code, out, _ := run("query", "--ca", cd.Cert.CertFile, "--repeat", "2", "--reuse", cd.TLS, "example.test", "a")
	require.Equal(t, 0, code)
	require.Contains(t, out, "example.test.\t300\tIN\tA\t"+testutil.ZoneA)
	require.Contains(t, out, ";; timing ms: socket")
	require.Contains(t, out, "TLS 1.3")
	require.Contains(t, out, ";; conn: reused")
	require.Contains(t, out, ";; 2/2 answered")

	// RFC 3597's generic name for a type asks for it, as dig's does.
	code, out, _ = run("query", cd.UDP, "example.test", "TYPE1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "example.test.\t300\tIN\tA\t"+testutil.ZoneA)
}

func silentUDP(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	return "udp://" + pc.LocalAddr().String()
}

func TestQueryErrorsAndExitCodes(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	closed := testutil.FreePort(t)
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no-args", []string{"query"}, 2, "want URL NAME [TYPE]"},
		{"bad-scheme", []string{"query", "ftp://127.0.0.1", "x.test"}, 2, "unknown scheme"},
		{"no-scheme", []string{"query", "127.0.0.1", "x.test"}, 2, "want scheme://host"},
		{"bad-type", []string{"query", cd.UDP, "x.test", "NOPE"}, 2, "unknown record type"},
		{"bad-name", []string{"query", cd.UDP, "a..b"}, 2, "bad domain name"},
		{"bad-flag", []string{"query", "--http", "9", cd.HTTPS, "x.test"}, 2, "unknown HTTP version"},
		{"missing-ca", []string{"query", "--ca", "/nonexistent.pem", cd.TLS, "x.test"}, 2, "reading --ca"},
		{"repeat-0", []string{"query", "--repeat", "0", cd.UDP, "x.test"}, 2, "--repeat must be from 1 to"},
		{"repeat-huge", []string{"query", "--repeat", "100000000", cd.UDP, "x.test"}, 2, "a load is doxlab bench's"},
		{"interval-negative", []string{"query", "--repeat", "2", "--interval", "-5s", cd.UDP, "x.test"}, 2, "--interval must be 0 or more"},
		{"refused", []string{"query", fmt.Sprintf("tcp://127.0.0.1:%d", closed), "x.test"}, 12, "refused"},
		{"cert", []string{"query", cd.QUIC, "example.test"}, 16, "cert-error"},
		{"timeout", []string{"query", "--timeout", "300ms", silentUDP(t), "example.test"}, 10, "timeout"},
		{"http", []string{"query", "--ca", cd.Cert.CertFile, "https://" + cd.DoH + "/nope", "example.test"}, 18, "HTTP 404"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := run(c.args...)
			require.Equal(t, c.code, code, errOut)
			require.Contains(t, errOut, c.msg)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
}

func TestNXDomainExitsZero(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	code, out, _ := run("query", "--json", cd.UDP, "missing.test")
	require.Equal(t, 0, code)
	require.Equal(t, "nxdomain", jsonLines(t, out)[0]["status"])
}

// TestMain removes the binary testutil.Doxlab built.
func TestMain(m *testing.M) {
	// 'testbed up' starts its own binary as the emulator ('testbed
	// daemon'): run from a test, that binary is this one, which would
	// run the tests again, each starting more.
	if len(os.Args) > 2 && os.Args[1] == "testbed" && os.Args[2] == "daemon" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	testutil.Main(m)
}

func TestProbeCommand(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	code, out, errOut := run("probe", "--count", "2", cd.QUIC)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "rtt"))
	require.Contains(t, out, "0x00000001", "QUIC v1 offered")
	code, out, _ = run("probe", "--json", cd.TLS)
	require.Equal(t, 0, code)
	require.Contains(t, out, `"kind":"tcp"`)
	code, _, errOut = run("probe", fmt.Sprintf("udp://127.0.0.1:%d", testutil.FreePort(t)))
	require.Equal(t, 12, code, errOut)
	require.Contains(t, errOut, "refused")
}

func TestMeasureCommand(t *testing.T) {
	cd := testutil.StartCoreDNS(t)
	code, out, errOut := run("measure", "--ca", cd.Cert.CertFile, "--name", "example.test", "--conditions", "fresh,0rtt", cd.UDP, cd.QUIC)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "udp    fresh")
	require.Contains(t, out, "doq    0rtt")
	dir := t.TempDir()
	bad := filepath.Join(dir, "targets")
	require.NoError(t, os.WriteFile(bad, []byte("# resolvers\n127.0.0.1\nnot a host\n"), 0o644))
	code, _, errOut = run("measure", "--targets", bad)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "targets:3:")
	code, _, errOut = run("measure", "--conditions", "warm", "127.0.0.1")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown condition")
}

func TestScanRefusesAndWritesZMapProbe(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scan", "127.0.0.1"}, "a rate limit is required"},
		{[]string{"scan", "--rate", "10"}, "no ranges given"},
		{[]string{"scan", "--rate", "10", "10.0.0.0/8"}, "--allow-large"},
		{[]string{"scan", "--rate", "1000000", "127.0.0.1"}, "--allow-fast"},
		{[]string{"scan", "--rate", "10", "--blocklist", "/nonexistent", "127.0.0.1"}, "reading blocklist"},
		{[]string{"scan", "--rate", "10", "169.254.169.254"}, "range 169.254.169.254/32 is in 169.254.0.0/16, link-local, cloud metadata (RFC 3927), and is special-purpose (RFC 6890) and not allowed: a scan probes a private, loopback, link-local or broadcast address only where the spec allows its block (--allow-special PREFIX)"},
		{[]string{"scan", "--rate", "10", "--allow-special", "8.8.8.0/24", "127.0.0.1"}, "8.8.8.0/24 is not special-purpose"},
		// Four billion targets once were made in memory before the
		// time bound refused them.
		{[]string{"scan", "--rate", "10000000", "--allow-fast", "--allow-large", "0.0.0.0/0"}, "more than 16777216 targets, the most a scan holds: a scan of the Internet is ZMap's, with doxlab's probe (--zmap-probe FILE writes it)"},
		{[]string{"scan", "--rate", "0.001", "--allow-large", "10.0.0.0/12"}, "3145728 targets at 0.001 probes per second take 36409 days, more than 366 (--rate)"},
	} {
		// Refused before the store opens: no run begun, no file made.
		db := filepath.Join(t.TempDir(), "scan.db")
		code, _, errOut := run(append([]string{"scan", "--store", db}, c.args[1:]...)...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		require.Contains(t, errOut, c.want)
		require.NoFileExists(t, db, "%v", c.args)
	}
	f := filepath.Join(t.TempDir(), "probe.bin")
	code, _, errOut := run("scan", "--zmap-probe", f)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.Len(t, b, 1200, "padded to the size a server answers")
}

// TestVersion: doxlab version and --version print the version on one
// line; an argument it does not take is a usage error, not ignored.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := run(args...)
		require.Equal(t, 0, code)
		require.Regexp(t, `^doxlab v\d+\.\d+\.\d+\S* \(.*\)\n$`, out)
	}
	code, _, errOut := run("version", "--bogus")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `takes no arguments, got "--bogus"`)
}

func TestVerifyBadInput(t *testing.T) {
	code, _, errOut := run("verify")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no candidates")
	code, _, errOut = run("verify", "ftp://x")
	require.Equal(t, 2, code, "a URL is no candidate, though it holds a colon")
	require.Contains(t, errOut, `"ftp://x" is not an IP address or IP:PORT`)
	f := filepath.Join(t.TempDir(), "t.csv")
	require.NoError(t, os.WriteFile(f, []byte("saddr,sport\n10.0.0.1,853\nnot-an-ip\n"), 0o644))
	code, _, errOut = run("verify", "--targets", f)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "t.csv:3:")
}

// TestHelpExitsZero: --help is an answer, not a usage error, on every
// subcommand, and the top-level help lists every experiment.
func TestHelpExitsZero(t *testing.T) {
	calls := [][]string{{"--help"}, {"campaign", "--help"}, {"experiment", "--help"}}
	for _, c := range everyCommand() {
		calls = append(calls, append(c, "--help"))
	}
	for _, args := range calls {
		code, out, errOut := run(args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		require.Empty(t, errOut, "%v: help goes to standard output", args)
		require.True(t, strings.HasPrefix(out, "usage: doxlab"), "%v: one help format: %q", args, out[:min(len(out), 40)])
	}
	code, out, _ := run("--help")
	require.Equal(t, 0, code)
	for _, name := range experiment.Names() {
		require.Contains(t, out, name)
	}
}

// everyCommand is every command and subcommand that takes flags.
func everyCommand() [][]string {
	var calls [][]string
	for _, c := range commands() {
		switch c.name {
		case "campaign", "store", "testbed", "experiment":
		default:
			calls = append(calls, []string{c.name})
		}
	}
	for _, sub := range []string{"run", "plan", "status", "cancel", "grant"} {
		calls = append(calls, []string{"campaign", sub})
	}
	for _, sub := range []string{"stats", "archive", "brief", "seal"} {
		calls = append(calls, []string{"store", sub})
	}
	for _, sub := range []string{"up", "down", "status", "exec", "profile", "check", "bloat"} {
		calls = append(calls, []string{"testbed", sub})
	}
	for _, name := range experiment.Names() {
		calls = append(calls, []string{"experiment", name})
	}
	return calls
}

// TestEveryBadFlagGetsOneLine: on every command and subcommand, a flag
// it does not have, and a number or duration flag given a word, get one
// line naming the flag and exit 2, never the usage after it (load, worker
// and campaign's subcommands printed their whole usage below the line).
func TestEveryBadFlagGetsOneLine(t *testing.T) {
	typed := regexp.MustCompile(`(?m)^  -([a-z0-9-]+) (int|uint|float|duration)$`)
	for _, c := range everyCommand() {
		_, help, _ := run(append(c, "--help")...)
		calls := [][]string{append(slices.Clone(c), "--no-such-flag")}
		if m := typed.FindStringSubmatch(help); m != nil {
			calls = append(calls, append(slices.Clone(c), "--"+m[1], "many"))
		}
		for _, args := range calls {
			code, out, errOut := run(args...)
			require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
			require.Empty(t, out, "%v", args)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "%v: one line: %q", args, errOut)
			require.Contains(t, errOut, args[len(args)-1], "%v", args)
			require.Contains(t, errOut, "doxlab "+strings.Join(c, " ")+":", "%v: names the command", args)
		}
	}
}

// TestMistakesGetOneLine: a mistyped command or flag, and a duration
// without its unit, get one line saying what was meant, not the usage.
func TestMistakesGetOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"mesure", "127.0.0.1"}, `unknown command "mesure" (did you mean measure?)`},
		{[]string{"experiment", "web", "--profile", "fiber"}, "unknown flag --profile (did you mean --profiles?)"},
		{[]string{"bench", "--duration", "3", "udp://127.0.0.1:1"}, "--duration 3: missing unit (e.g. 3s or 3ms)"},
		{[]string{"measure", "--timeout", "soon", "127.0.0.1"}, `--timeout "soon": not a duration`},
		// A timeout of 0 or less: every step had failed at once, each
		// saying it timed out (and the worker's rescue taken as 2m).
		{[]string{"probe", "--timeout", "-1s", "udp://127.0.0.1:1"}, "--timeout -1s: want a positive duration"},
		{[]string{"probe", "--count", "0", "udp://127.0.0.1:1"}, "--count 0: want 1 to 10000"},
		{[]string{"probe", "--count", "1000000000", "udp://127.0.0.1:1"}, "--count 1000000000: want 1 to 10000"},
		{[]string{"verify", "--timeout", "0s", "127.0.0.1"}, "--timeout 0s: want a positive duration"},
		{[]string{"measure", "--timeout", "0s", "127.0.0.1"}, "--timeout 0s: want a positive duration"},
		{[]string{"query", "--timeout", "-1s", "udp://127.0.0.1:1", "x.test"}, "--timeout -1s: want a positive duration"},
		{[]string{"load", "--timeout", "-3s", "https://example.test/"}, "--timeout -3s: want a positive duration"},
		// A count of 0 or less was taken for the default: dns-rtt's 20
		// lookups a cell, measure's one.
		{[]string{"experiment", "dns-rtt", "--repeat", "0"}, `--repeat "0": want 1 or more`},
		{[]string{"experiment", "hol", "--queries", "-5"}, `--queries "-5": want 1 or more`},
		{[]string{"experiment", "server-load", "--conns", "0"}, `--conns "0": want 1 or more`},
		{[]string{"measure", "--repeat", "0", "udp://127.0.0.1:1"}, `--repeat "0": want 1 or more`},
		{[]string{"serve", "--delay", "-50ms"}, "--delay -50ms: want 0 or more"},
		{[]string{"serve", "--delay-every", "-3"}, "--delay-every -3: want 0 (none) or more"},
		{[]string{"worker", "--vantage", "fra1", "--store", "postgres://nobody@127.0.0.1:1/x", "--rescue-after", "-5m"}, "--rescue-after -5m0s: want a positive duration"},
	} {
		code, out, errOut := run(c.args...)
		require.Equal(t, exitUsage, code, "%v", c.args)
		require.Empty(t, out)
		require.Contains(t, errOut, c.msg, "%v", c.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	}
}

// TestWorkerEnvironmentIsChecked: a worker configured by its container's
// environment refuses a value it cannot read, in one line naming the
// variable, before it reaches for the store, where a typo once fell
// back to the default unsaid (DOXLAB_DRAIN=true was no drain: a
// Kubernetes Job that never exited); and it takes a boolean as its flag
// does (--help shows the defaults the environment gave).
func TestWorkerEnvironmentIsChecked(t *testing.T) {
	args := []string{"worker", "--vantage", "fra1", "--store", "postgres://nobody@127.0.0.1:1/x"}
	for _, c := range []struct{ key, value, msg string }{
		{"DOXLAB_CONCURRENCY", "eight", "$DOXLAB_CONCURRENCY=eight: want a whole number"},
		{"DOXLAB_RESCUE_AFTER", "90", "$DOXLAB_RESCUE_AFTER=90: want a duration such as 90s or 2m"},
		{"DOXLAB_DRAIN", "yes", "$DOXLAB_DRAIN=yes: want 1 or 0 (true or false)"},
		{"DOXLAB_DRAIN", "1\x1b[2J", `$DOXLAB_DRAIN=1\x1b[2J: want`},
	} {
		t.Run(c.key, func(t *testing.T) {
			t.Setenv(c.key, strings.ReplaceAll(c.value, `\x1b`, "\x1b"))
			code, out, errOut := run(args...)
			require.Equal(t, exitUsage, code)
			require.Empty(t, out)
			require.Contains(t, errOut, c.msg)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
	t.Setenv("DOXLAB_DRAIN", "true")
	t.Setenv("DOXLAB_CONCURRENCY", "8")
	t.Setenv("DOXLAB_RESCUE_AFTER", "90s")
	_, help, _ := run("worker", "--help")
	for _, flag := range []string{"-drain", "-concurrency", "-rescue-after"} {
		_, entry, ok := strings.Cut(help, "\n  "+flag)
		require.True(t, ok, flag)
		line, _, _ := strings.Cut(entry, "\n  -")
		want := map[string]string{"-drain": "(default true)", "-concurrency": "(default 8)", "-rescue-after": "(default 1m30s)"}[flag]
		require.Contains(t, line, want, flag)
	}
}

// TestExportKnowsEveryKind: export's kinds come from the packages that
// declare them, so none is missing.
func TestExportKnowsEveryKind(t *testing.T) {
	var names []string
	for _, k := range store.Kinds() {
		names = append(names, string(k))
	}
	require.ElementsMatch(t, []string{"hol-query", "amplification", "overhead-conn", "scan", "verify-doq", "verify-dot", "verify-doh", "bench", "bench-samples", "link-check", "campaign-duplicate", "campaign-load", "page-graph", "web-load", "coalescing-load", "resume-forced", "supersedes", "privacy"}, names)
	db := filepath.Join(t.TempDir(), "x.db")
	st, err := store.Open(context.Background(), db)
	require.NoError(t, err)
	st.Close()
	code, _, errOut := run("export", "--store", db, "--table", "results", "--kind", "nonsense")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "verify-doh")
}

// TestMistypedStoreIsNoNewStore: the commands that read a store refuse a
// SQLite path where there is none, in one line, and leave no empty
// store behind (campaign status made one, then said it held nothing).
func TestMistypedStoreIsNoNewStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "campain.db")
	for _, args := range [][]string{
		{"campaign", "status", "--store", missing},
		{"campaign", "cancel", "--run", "r", "--store", missing},
		{"campaign", "grant", "--store", missing, "worker"},
		{"report", "--store", missing, "--out", filepath.Join(t.TempDir(), "r")},
		{"export", "--store", missing},
		{"store", "stats", "--store", missing},
	} {
		code, _, errOut := run(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "no store at "+missing, "%v", args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		require.NoFileExists(t, missing, "%v made a store", args)
	}
}

// TestFilesReadWholeAreBounded: a file doxlab reads whole (a CA, a
// config, a certificate, a spec, a profile) given as a device that never
// ends gets one line naming it and the bound; each of these exhausted
// memory before.
func TestFilesReadWholeAreBounded(t *testing.T) {
	const dev = "/dev/zero"
	if _, err := os.Stat(dev); err != nil {
		t.Skip(dev, "is not on this system")
	}
	for _, args := range [][]string{
		{"query", "--ca", dev, "tls://127.0.0.1:1", "x.test"},
		{"measure", "--ca", dev, "tls://127.0.0.1:1"},
		{"bench", "--ca", dev, "--duration", "1s", "tls://127.0.0.1:1"},
		{"serve", "--config", dev},
		{"serve", "--cert", dev, "--key", dev, "--udp", "127.0.0.1:0"},
		{"campaign", "run", dev},
		{"experiment", "dns-rtt", "--profiles", dev},
	} {
		code, _, errOut := run(args...)
		require.NotZero(t, code, "%v", args)
		require.Contains(t, errOut, dev+": over 16 MiB", "%v", args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "%v: one line: %q", args, errOut)
	}
}

// fullWriter fails every write, as a file on a full disk does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestLostOutputFails: output that could not be written fails its
// command in one line, whatever the command did with the error: store
// stats, export --runs, version and query --json exited 0 with nothing
// written, and measure --out exited 0 having kept none of its samples.
func TestLostOutputFails(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(context.Background(), db)
	require.NoError(t, err)
	st.Close()
	cd := testutil.StartCoreDNS(t)
	for _, args := range [][]string{{"version"}, {"store", "stats", "--json", "--store", db}, {"store", "stats", "--store", db},
		{"query", "--json", cd.UDP, testutil.ZoneName}, {"measure", "--json", "--name", testutil.ZoneName, "--transports", "udp", "--conditions", "fresh", cd.UDP}} {
		var errOut bytes.Buffer
		code := Main(args, fullWriter{}, &errOut)
		require.Equal(t, 1, code, "%v: %s", args, errOut.String())
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		last := lines[len(lines)-1]
		require.True(t, strings.HasPrefix(last, "doxlab "+args[0]) && strings.HasSuffix(last, ": no space left on device"), "%v: %q", args, last)
		if args[0] != "measure" { // which also says its progress
			require.Len(t, lines, 1, "%v: one line", args)
		}
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	code, _, errOut := run("measure", "--repeat", "2", "--name", testutil.ZoneName, "--transports", "udp", "--conditions", "fresh", "--out", "/dev/full", cd.UDP)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "writing the samples to /dev/full: write /dev/full: no space left on device (none was kept elsewhere)")
	stored := filepath.Join(t.TempDir(), "m.db")
	code, _, errOut = run("measure", "--repeat", "2", "--name", testutil.ZoneName, "--transports", "udp", "--conditions", "fresh", "--out", "/dev/full", "--store", stored, cd.UDP)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "(every one is in the store, run ")
}

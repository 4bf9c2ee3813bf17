package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTestbedTrace: gen writes a built-in trace that show reads back as
// the built-in itself (same opportunities, same hash); convert turns a
// throughput log into a trace at its rates; a constant trace's windows
// are all its rate, and one shorter than a window says so.
func TestTestbedTrace(t *testing.T) {
	dir := t.TempDir()
	code, gen, errOut := run("testbed", "trace", "gen", "const-720m")
	require.Equal(t, exitOK, code, errOut)
	file := filepath.Join(dir, "const.trace")
	require.NoError(t, os.WriteFile(file, []byte(gen), 0o644))
	code, builtin, _ := run("testbed", "trace", "show", "const-720m")
	require.Equal(t, exitOK, code)
	require.Contains(t, builtin, "600000 opportunities of 1500 octets over 10s, repeating; mean 720.00 Mbit/s; 100ms windows from 720.00 to 720.00 Mbit/s")
	code, shown, _ := run("testbed", "trace", "show", file)
	require.Equal(t, exitOK, code)
	_, tail, _ := strings.Cut(builtin, ":")
	require.Equal(t, file+":"+tail, shown, "the file gen wrote is the built-in")

	// 12 Mbit/s for a second is 1,000 opportunities of 1,500 octets.
	log := filepath.Join(dir, "rates.log")
	require.NoError(t, os.WriteFile(log, []byte("# seconds bit/s\n0 12000000\n1 12000000\n"), 0o644))
	code, conv, errOut := run("testbed", "trace", "convert", log)
	require.Equal(t, exitOK, code, errOut)
	require.Len(t, strings.Fields(conv), 1000)
	require.NoError(t, os.WriteFile(file, []byte(conv), 0o644))
	code, shown, _ = run("testbed", "trace", "show", file)
	require.Equal(t, exitOK, code)
	require.Contains(t, shown, "1000 opportunities of 1500 octets over 1s, repeating; mean 12.00 Mbit/s; 100ms windows from 12.00 to 12.00 Mbit/s")

	require.NoError(t, os.WriteFile(file, []byte("1\n2\n50\n"), 0o644))
	code, shown, _ = run("testbed", "trace", "show", file)
	require.Equal(t, exitOK, code)
	require.Contains(t, shown, "3 opportunities of 1500 octets over 50ms, repeating; mean 0.72 Mbit/s; shorter than one 100ms window;")
}

// TestTestbedTraceRefuses: a file that is no trace, or no log, is one
// line naming the file and what is wrong, exit 2; a command that is not
// one gets the usage.
func TestTestbedTraceRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for _, c := range []struct {
		cmd, file, says string
	}{
		{"show", write("empty.trace", ""), "no delivery opportunities"},
		{"show", write("words.trace", "abc\n"), `words.trace:1: "abc" is not a millisecond count`},
		{"show", write("back.trace", "5\n3\n"), "back.trace:2: 3 ms comes after 5 ms"},
		{"show", write("neg.trace", "-5\n1\n"), `"-5" is not a millisecond count`},
		{"show", write("huge.trace", "99999999999999999999\n"), "is not a millisecond count"},
		{"show", write("zero.trace", "0\n"), "must last longer than 0 ms"},
		{"show", filepath.Join(dir, "absent"), "not a built-in one"},
		{"convert", write("one.log", "0 1000000\n"), "two samples at least"},
		{"convert", write("nan.log", "0 NaN\n1 5\n"), "is not two non-negative numbers"},
		{"convert", write("back.log", "1 5\n0 5\n"), "time 0 s does not come after 1 s"},
		{"convert", write("day.log", "0 1000\n1e9 1000\n"), "longer than a day"},
		{"convert", write("fast.log", "0 1e30\n1 1e30\n"), "more than a trace may hold"},
		{"convert", write("idle.log", "0 0\n1 0\n"), "no opportunity"},
		{"convert", filepath.Join(dir, "absent.log"), "no such file"},
	} {
		code, out, errOut := run("testbed", "trace", c.cmd, c.file)
		require.Equal(t, exitUsage, code, "%s %s", c.cmd, c.file)
		require.Empty(t, out)
		require.Contains(t, errOut, c.says, "%s %s", c.cmd, c.file)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	}
	code, _, errOut := run("testbed", "trace", "gen", "const-1g")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `no built-in trace "const-1g"`)
	require.Contains(t, errOut, "const-720m, lte-driving", "the usage lists the built-ins")
	code, _, errOut = run("testbed", "trace", "play", "x")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `unknown command "play"`)
}

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// runHint runs a command doxlab printed, as a user pastes it into a
// shell, from another directory than the one it was printed in.
func runHint(t *testing.T, line string) (int, string) {
	t.Helper()
	require.True(t, strings.HasPrefix(line, "doxlab "), line)
	cmd := exec.Command("sh", "-c", testutil.Doxlab(t)+line[len("doxlab"):])
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, line)
		code = exit.ExitCode()
	}
	return code, string(out)
}

// hints are the commands printed after "with: ", in order.
func hints(out string) []string {
	var out2 []string
	for _, m := range regexp.MustCompile(`with: (doxlab [^\n)]*)`).FindAllStringSubmatch(out, -1) {
		out2 = append(out2, strings.TrimSpace(m[1]))
	}
	return out2
}

// runTheHint runs the one command errOut tells the user to run, as
// pasted, and returns what it printed; it must work (exit 0).
func runTheHint(t *testing.T, errOut string) string {
	t.Helper()
	hs := hints(errOut)
	require.Len(t, hs, 1, errOut)
	code, out := runHint(t, hs[0])
	require.Equal(t, 0, code, out)
	return out
}

// TestPrintedHintsWork: every command doxlab prints for the user to run
// works as printed, pasted elsewhere: a measurement's continue and
// report hints, a campaign's, with a store path that needs quoting; and
// a wrong store is named, not created.
func TestPrintedHintsWork(t *testing.T) {
	srv := startServe(t, "--udp", "127.0.0.1:0", "--any", "192.0.2.1")
	dir := filepath.Join(t.TempDir(), "my runs") // a space: the hint quotes it
	require.NoError(t, os.Mkdir(dir, 0o755))
	dsn := filepath.Join(dir, "s.db")
	code, _, errOut := run("measure", "--store", dsn, "--conditions", "fresh", "--repeat", "2", "udp://"+srv.Listeners["udp"])
	require.Equal(t, 0, code, errOut)
	hs := hints(errOut)
	require.Len(t, hs, 2, errOut)
	require.Contains(t, hs[0], "--run ")
	require.Contains(t, hs[1], "doxlab report --store '"+dsn+"'")

	code, out := runHint(t, hs[0]) // continue: nothing left to measure, the whole run shown
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "2 samples stored before, 0 now")
	require.Contains(t, out, "answered 2/2")
	code, out = runHint(t, hs[1])
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "report.html: 2 samples")

	// A campaign's hints name its store, which the spec set.
	spec := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("targets: [\"udp://"+srv.Listeners["udp"]+"\"]\nallow_special: [127.0.0.0/8]\nconditions: [fresh]\nrepeat: 2\nstore: \""+dsn+"\"\n"), 0o644))
	code, _, errOut = run("campaign", "run", spec)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = run("campaign", "run", spec)
	require.Equal(t, 2, code, errOut)
	runTheHint(t, errOut)

	// A run continued in a store that is not there: named, not created.
	wrong := filepath.Join(dir, "y.db")
	code, _, errOut = run("measure", "--store", wrong, "--run", "20260101T000000Z-0000000000000000", "udp://"+srv.Listeners["udp"])
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no store at "+wrong)
	code, _, errOut = run("experiment", "dns-rtt", "--store", wrong, "--resume", "dnsrtt-x")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no store at "+wrong)
	require.NoFileExists(t, wrong)
}

// TestResumeReadsTheDesign: a resume sets the design flags left unset to
// the stored design's values, leaves what the command line set and
// values as they already are (a repeatable flag's empty value is no
// value to add).
func TestResumeReadsTheDesign(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	env := &experiment.Env{Store: dsn, Design: map[string]string{"repeat": "3", "profiles": "fiber,4g", "snapshot": "", "seed": "9"}, Log: io.Discard}
	require.NoError(t, env.BeginRun(ctx, st, "dnsrtt-x-fiber", "experiment:dns-rtt", "fiber", map[string]any{"experiment": "dnsrtt-x"}))
	st.Close()

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	repeat := fs.Int("repeat", 20, "")
	var profiles []string
	experiment.ListVar(fs, &profiles, "profiles", []string{"fiber"}, "")
	fs.Func("snapshot", "", func(s string) error { return fmt.Errorf("snapshot %q", s) })
	seed := fs.Uint64("seed", 0, "")
	require.NoError(t, fs.Parse([]string{"--profiles", "dsl"}))
	var errOut strings.Builder
	require.Equal(t, exitOK, resumeDesign(fs, dsn, "dnsrtt-x", "experiment dns-rtt", &errOut), errOut.String())
	require.Equal(t, 3, *repeat, "from the store")
	require.Equal(t, []string{"dsl"}, profiles, "the command line wins")
	require.Zero(t, *seed, "how a run goes is not its design")
}

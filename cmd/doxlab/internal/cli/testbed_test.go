//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/testbed"
)

// TestTestbedLifecycle drives the real binary: up (twice: idempotent),
// exec, profile, status; then the emulator is killed with SIGKILL and
// down still removes everything.
func TestTestbedLifecycle(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	bin := testutil.Doxlab(t)
	doxlab := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	defer doxlab("testbed", "down", "--name", "tcli")
	out2, err := doxlab("testbed", "up", "--name", "tcli", "--profile", "fiber")
	require.NoError(t, err, out2)
	require.Contains(t, out2, "link fiber")
	out2, err = doxlab("testbed", "up", "--name", "tcli", "--profile", "4g")
	require.NoError(t, err, out2)
	require.Contains(t, out2, "already up")
	out2, err = doxlab("testbed", "exec", "--name", "tcli", "client", "--", "cat", "/etc/resolv.conf")
	require.NoError(t, err, out2)
	require.Contains(t, out2, "nameserver 10.200.0.2")
	out2, err = doxlab("testbed", "profile", "--name", "tcli", "cable")
	require.NoError(t, err, out2)
	out2, err = doxlab("testbed", "status", "--name", "tcli")
	require.NoError(t, err, out2)
	require.Contains(t, out2, "link cable")
	_, err = doxlab("testbed", "exec", "--name", "tcli", "client", "--", "false")
	require.Error(t, err, "exec passes the exit status on")
	// exec becomes its command, so a signal to it (the demo's trap, a
	// shell's kill) reaches the command: a server started so was left
	// running when exec ran it as a child.
	sleeper := exec.Command(bin, "testbed", "exec", "--name", "tcli", "server", "--", "sleep", "30")
	sleeper.Stdout, sleeper.Stderr = os.Stdout, os.Stderr
	require.NoError(t, sleeper.Start())
	comm := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleeper.Process.Pid))
		return strings.TrimSpace(string(b))
	}
	require.Eventually(t, func() bool { return comm() == "sleep" }, testutil.Scaled(5*time.Second), 10*time.Millisecond, "exec is its command: %q", comm())
	require.NoError(t, sleeper.Process.Signal(syscall.SIGTERM))
	require.Error(t, sleeper.Wait(), "the command was the one signalled")
	_, err = doxlab("testbed", "profile", "--name", "tcli", "5g")
	require.Error(t, err)

	st, err := testbed.Load("tcli")
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(st.PID, syscall.SIGKILL))
	for st.Alive() {
	}
	out2, _ = doxlab("testbed", "status", "--name", "tcli")
	require.Contains(t, out2, "NOT RUNNING")
	out2, err = doxlab("testbed", "down", "--name", "tcli")
	require.NoError(t, err, out2)
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "doxlab-tcli-"), "left behind: %s", e.Name())
	}
	require.NoDirExists(t, "/etc/netns/doxlab-tcli-client")
	require.NoFileExists(t, filepath.Join(os.TempDir(), "doxlab-testbed-tcli.log"), "an empty emulator log is removed")
}

// TestCheckUnderBrowserLoad runs the fidelity check while real Chromium
// loads the corpus pages in a host of its own.
func TestCheckUnderBrowserLoad(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	testutil.NeedChromium(t)
	out, err := exec.Command(testutil.Doxlab(t), "testbed", "check", "--name", "tbload", "--profiles", "fiber", "--probes", "100", "--throughput", "500ms", "--browser-load").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Regexp(t, `(?m)^fiber +14\.809 .* 0 +\S+ +\d+% +\S+ +\d+% +\d+% +\d+ms +≤\d+µs +≤\d+µs$`, string(out), "a row with no probe lost")
	require.Regexp(t, `Chromium loaded [1-9]\d* pages during the check`, string(out))
	require.NotContains(t, string(out), "check: browser load", "no browser error")
}

// TestTestbedCheckRefusesBeforeStarting: what testbed check is asked
// is checked whole before a busy process or a testbed starts, so a
// typo costs one line and exit 2, as root or not.
func TestTestbedCheckRefusesBeforeStarting(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--cpu-load", "100000"}, "--cpu-load 100000: want 0 to 64"},
		{[]string{"--cpu-load", "-1"}, "--cpu-load -1"},
		{[]string{"--probes", "-5"}, "-5 RTT probes"},
		{[]string{"--probes", "0"}, "--probes and --throughput must be more than 0"},
		{[]string{"--probes", "1000000"}, "want 1 to 12000"},
		{[]string{"--throughput", "-1s"}, "throughput test of -1s"},
		{[]string{"--throughput", "2h"}, "throughput test of 2h0m0s"},
		{[]string{"--profiles", "fiber,fibre", "--cpu-load", "64"}, `"fibre"`},
	} {
		code, _, errOut := run(append([]string{"testbed", "check", "--name", "tbrefuse"}, c.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.says, "%v", c.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	}
	_, err := testbed.Load("tbrefuse-check")
	require.Error(t, err, "no testbed was started")
}

// TestTestbedRefusesNamesThatAreNoName: a --name that is not one testbed
// name ("..", a path) is a usage error of one line, before anything is
// made of it: testbed up made its emulator's log at
// /tmp/doxlab-testbed-NAME.log, which "x/../../../tmp/escaped" put
// elsewhere, and down removed the state directory NAME named.
func TestTestbedRefusesNamesThatAreNoName(t *testing.T) {
	escaped := filepath.Join(os.TempDir(), "escaped.log")
	os.Remove(escaped)
	for _, sub := range []string{"up", "down", "status", "profile", "check", "bloat"} {
		for _, name := range []string{"..", "", "x/../../../" + strings.TrimPrefix(os.TempDir(), "/") + "/escaped", "a b"} {
			code, out, errOut := run("testbed", sub, "--name", name)
			require.Equal(t, exitUsage, code, "%s %q: %s", sub, name, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, "--name", "%s %q", sub, name)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		}
	}
	require.NoFileExists(t, escaped)
}

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestReadmeExamples runs the README's first steps as written, as
// CoreDNS's test/readme_test.go does for its plugins: every "$ doxlab"
// line between the examples markers, servers in the background, the
// rest in a temporary directory, each ending with exit 0. "$ sudo doxlab"
// lines need root (an emulated network of their own) and Chromium: they
// run as root but under -short, and are skipped, said so, otherwise.
func TestReadmeExamples(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(b)
	start, end := strings.Index(text, "<!-- examples"), strings.Index(text, "<!-- /examples -->")
	require.True(t, start > 0 && end > start, "the README marks its examples")
	var cmds, rooted []string
	for _, line := range strings.Split(text[start:end], "\n") {
		if c, ok := strings.CutPrefix(line, "$ doxlab "); ok {
			cmds = append(cmds, c)
		}
		if c, ok := strings.CutPrefix(line, "$ sudo doxlab "); ok {
			rooted = append(rooted, c)
		}
	}
	require.GreaterOrEqual(t, len(cmds), 6)
	require.NotEmpty(t, rooted)
	bin := testutil.Doxlab(t) // built before leaving the package's directory
	t.Chdir(t.TempDir())
	outputs := map[string]string{}
	for _, c := range cmds {
		args := strings.Fields(c)
		if args[len(args)-1] == "&" {
			cmd := exec.Command(bin, args[:len(args)-1]...)
			require.NoError(t, cmd.Start(), c)
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			addr := "127.0.0.1:5300"
			for i, a := range args {
				if a == "--udp" {
					addr = args[i+1]
				}
			}
			testutil.WaitDNS(t, "udp", addr)
			continue
		}
		var code int
		var out, errOut string
		for try := 0; try < 20; try++ { // a QUIC listener may still be binding
			if code, out, errOut = doxlab(t, args...); code == 0 || args[0] != "query" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.Equal(t, 0, code, "doxlab %s: %s", c, errOut)
		outputs[args[0]] = out + errOut
	}
	require.Contains(t, outputs["query"], "192.0.2.1")
	require.Contains(t, outputs["measure"], "answered 24/24")
	require.Contains(t, outputs["export"], "24 samples to first.parquet")
	require.Contains(t, outputs["bench"], "4000 answered")
	for _, c := range rooted {
		if testing.Short() { // the laptop's check: the testbed and Chromium are the e2e lane's
			t.Logf("-short: doxlab %s left out", c)
			continue
		}
		if os.Geteuid() != 0 {
			testutil.Missing(t, "doxlab "+c+" needs root")
			continue
		}
		out, err := exec.Command(bin, strings.Fields(c)...).CombinedOutput()
		require.NoError(t, err, "doxlab %s: %s", c, out)
		require.Contains(t, string(out), "stored in web.db: 12 page loads")
		require.Regexp(t, `chromium stub +fiber +wiki +doq +cold +1rtt +6/6 `, string(out))
	}
}

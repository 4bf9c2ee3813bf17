package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/reportcheck"
	"github.com/doxlab/doxlab/internal/testutil"
)

// TestTwoResolversReport measures two resolvers over all seven
// transports on loopback, one 2 ms slower, and reads the report as a
// researcher does: each resolver first, in milliseconds, a colour each
// in every panel; every figure legible at both print sizes.
func TestTwoResolversReport(t *testing.T) {
	testutil.NeedRoot(t, "the resolvers serve on their standard ports")
	testutil.NeedChromium(t)
	dir := t.TempDir()
	for i, ip := range []string{"127.0.0.5", "127.0.0.6"} {
		args := []string{"serve", "--udp", ip + ":53", "--tcp", ip + ":53", "--dot", ip + ":853", "--doq", ip + ":853", "--doh", ip + ":443", "--doh3", ip + ":443",
			"--any", "192.0.2.1", "--ready", filepath.Join(dir, fmt.Sprintf("ready%d.json", i))}
		if i == 1 {
			args = append(args, "--delay", "2ms")
		}
		cmd := exec.Command(testutil.Doxlab(t), args...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready%d.json", i))); return err == nil }, 10*time.Second, 20*time.Millisecond)
	}
	db := filepath.Join(dir, "r.db")
	code, out, errOut := doxlab(t, "measure", "--store", db, "--insecure", "--conditions", "fresh", "--repeat", "8",
		"--transports", "udp,tcp,dot,doh1,doh2,doh3,doq", "127.0.0.5", "127.0.0.6")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "answered 112/112")
	// measure's rows: a resolver's together, in the order given.
	first, second := strings.Index(out, "127.0.0.5 udp"), strings.Index(out, "127.0.0.6 udp")
	require.True(t, first > 0 && second > strings.Index(out, "127.0.0.5 doq"), out)

	rep := filepath.Join(dir, "rep")
	code, _, errOut = doxlab(t, "report", "--store", db, "--out", rep)
	require.Equal(t, 0, code, errOut)
	html, err := os.ReadFile(filepath.Join(rep, "report.html"))
	require.NoError(t, err)
	page := string(html)
	require.Less(t, strings.Index(page, `id="resolvers"`), strings.Index(page, `id="summary"`), "per resolver first")
	require.Less(t, strings.Index(page, `id="cdf-total-by-resolver"`), strings.Index(page, `id="cdf-total"`), "per-resolver figure first")
	require.Contains(t, page, "DNS exchange (ms)", "loopback in ms")
	require.NotContains(t, page, "multiples of the RTT)", "no round-trip multiples on loopback")

	pages, err := reportcheck.Open(context.Background(), filepath.Join(rep, "report.html"), t.TempDir(), 1440, 1024)
	require.NoError(t, err)
	for _, p := range pages {
		for _, f := range p.Figures {
			require.Empty(t, f.Legible.Problems, "%s at %d px", f.ID, p.Width)
		}
	}
	var files []string
	for _, suffix := range []string{".svg", "-1col.svg"} {
		for _, f := range []string{"cdf-total-by-resolver", "cdf-total"} {
			files = append(files, filepath.Join(rep, f+suffix))
		}
	}
	got, err := reportcheck.Files(context.Background(), files...)
	require.NoError(t, err)
	for _, f := range files {
		require.Empty(t, got[f].Problems, f)
		if strings.Contains(f, "by-resolver") {
			require.Equal(t, 2, got[f].Legend, "%s: a legend entry per resolver, not per URL", f)
		}
	}
}

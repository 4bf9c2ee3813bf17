// Package e2e runs doxlab as a user does, the built binary and nothing
// else: the experiments end to end on the testbed (root), their reports
// in Chromium, and the README's first steps. 'make e2e' is its lane;
// the CLI's own tests, in-process, are the unit lane's. The experiments
// and the images, each on a testbed of its own in namespaces and mostly
// waiting on its emulated links, run two at a time (t.Parallel), after
// the tests that serve on this machine's own ports and the amplification
// experiment's (its stalls are pauses a busy machine would fake), one at
// a time.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/reportcheck"
	"github.com/doxlab/doxlab/internal/testutil"
)

// TestMain removes the binary testutil.Doxlab built.
func TestMain(m *testing.M) { testutil.Main(m) }

// doxlab runs the binary with args and returns its exit code and output.
func doxlab(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(testutil.Doxlab(t), args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("doxlab %v: %v", args, err)
	}
	return code, o.String(), e.String()
}

// checkReport opens a report in headless Chromium at a desktop and a
// laptop width: it has exactly these sections, a verdict for each finding,
// and every figure draws data, links it and reads cleanly (no text cut
// off or on other text, no two series alike), one column wide too.
func checkReport(t *testing.T, html string, sections ...string) {
	t.Helper()
	testutil.NeedChromium(t)
	pages, err := reportcheck.Open(context.Background(), html, t.TempDir(), 1440, 1024)
	require.NoError(t, err)
	for _, p := range pages {
		require.Equal(t, sections, p.Sections, "%d px", p.Width)
		require.NotEmpty(t, p.Findings, "each experiment states its findings")
		for _, v := range p.Findings {
			require.Contains(t, []string{"holds", "differs", "no data"}, v)
		}
		require.NotEmpty(t, p.Figures)
		for _, f := range p.Figures {
			require.Greater(t, f.Marks, 10, "%s draws its data", f.ID)
			require.False(t, f.NoData, "%s has an empty panel", f.ID)
			require.True(t, f.CSV, "%s links its data", f.ID)
			require.Empty(t, f.Legible.Problems, "%s at %d px", f.ID, p.Width)
		}
		require.False(t, p.Overflow, "no sideways scrolling at %d px", p.Width)
	}
	var cols []string
	for _, f := range pages[0].Figures {
		cols = append(cols, filepath.Join(filepath.Dir(html), f.ID+"-1col.svg"))
	}
	got, err := reportcheck.Files(context.Background(), cols...)
	require.NoError(t, err)
	for _, f := range cols {
		require.Empty(t, got[f].Problems, f)
	}
}

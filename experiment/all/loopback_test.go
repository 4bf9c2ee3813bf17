package all_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/store"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// smaller shrinks the quick runs to a sample or so a cell (hol's Poisson
// arrivals and server-load's steps to a second), to keep the test to
// seconds: each experiment's own test runs it larger.
var smaller = map[string]map[string]string{
	"dns-rtt":       {"repeat": "1"},
	"coalescing":    {"repeat": "1"},
	"hol":           {"queries": "10", "rate": "200", "delay": "50ms"},
	"amplification": {"repeat": "1"},
	"privacy":       {"repeat": "1"},
	"server-load":   {"start": "200", "limit": "400", "step": "300ms"},
}

// TestEveryExperimentOnLoopback is the quick demo without root: every
// registered experiment but web (which needs Chromium, and has a
// loopback test of its own) runs --quick on the loopback net into one
// store, as the CLI runs it (its flags, --profiles none), and the report
// draws a section of each, says in its header that nothing was
// emulated, and earns no verdict on a claim about time.
func TestEveryExperimentOnLoopback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "demo.db")
	var ran []string
	for _, info := range experiment.Registered() {
		if info.Name == "web" {
			continue
		}
		e := info.New()
		fs := flag.NewFlagSet(info.Name, flag.ContinueOnError)
		e.Environment().Flags(fs, info.Resumable)
		e.Flags(fs)
		e.Quick()
		require.NoError(t, fs.Set("store", db))
		require.NoError(t, fs.Set("net", experiment.NetLoopback))
		for _, name := range []string{"profiles", "profile"} {
			if fs.Lookup(name) != nil {
				require.NoError(t, fs.Set(name, "none"))
			}
		}
		for name, v := range smaller[info.Name] {
			require.NoError(t, fs.Set(name, v), "%s --%s", info.Name, name)
		}
		// privacy's browser part drives Chromium: a laptop without it
		// runs the rest (CI, which installs it, runs the part).
		if _, err := browser.FindExec(""); err != nil && fs.Lookup("no-browser") != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s: %v", info.Name, err)
			}
			t.Logf("%s: --no-browser: %v", info.Name, err)
			require.NoError(t, fs.Set("no-browser", "true"))
		}
		t0 := time.Now()
		_, err := e.Run(ctx)
		require.NoError(t, err, info.Name)
		t.Logf("%s: %.1f s", info.Name, time.Since(t0).Seconds()) // what to shrink when the test grows slow
		ran = append(ran, info.Name)
	}
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	in, runs, err := report.Load(ctx, st, "")
	require.NoError(t, err)
	rep, err := report.Render(in, filepath.Join(dir, "report"), report.Title(runs))
	require.NoError(t, err)
	html, err := os.ReadFile(rep.HTML)
	require.NoError(t, err)
	require.Contains(t, string(html), "on the loopback net, nothing emulated")
	require.Contains(t, string(html), "link checks on the loopback net measured nothing")
	ids := map[string]bool{}
	for _, s := range rep.Sections {
		ids[s.ID] = true
		require.Contains(t, string(html), `id="`+s.ID+`"`)
	}
	require.Len(t, rep.Sections, len(ran), "a section per experiment: %v", ids)
	for _, f := range rep.Findings {
		if f.InRTTs || f.Timed {
			require.NotEqual(t, experiment.Holds, f.Verdict, "%s: %s", f.Claim, f.Reason)
			require.NotEqual(t, experiment.Differs, f.Verdict, "%s: %s", f.Claim, f.Reason)
		}
	}
}

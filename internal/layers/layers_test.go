package layers_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/doxlab/doxlab/"

type pkg struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// graph lists every package of the module with its imports.
func graph(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("go list: %v: %s", err, ee.Stderr)
	}
	require.NoError(t, err)
	m := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		m[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	require.Contains(t, m, "store", "go list found the module")
	return m
}

// within says whether the import path dep is the package p or one below
// it ("doxlab/testbed" is not "doxlab/testbed/profiles").
func within(dep, p string) bool {
	return dep == p || strings.HasPrefix(dep, p+"/")
}

// TestFloorsLinkNothingAbove: each package links none of what it must
// not, through any path. Each line says why.
func TestFloorsLinkNothingAbove(t *testing.T) {
	floors := []struct {
		pkg, why string
		not      []string
	}{
		{"store", "every package that stores anything imports the store; it runs and draws nothing",
			[]string{"github.com/chromedp", module + "server", module + "pageload", module + "browser", module + "corpus", module + "experiment", module + "report", module + "figure"}},
		{"bench", "a load generator that stores its samples needs the store, not the experiments",
			[]string{module + "experiment", "github.com/chromedp"}},
		{"pageload", "doxlab's own page loader replays graphs; only pageload/capture reads a browser's trace",
			[]string{"github.com/chromedp", module + "browser"}},
		{"corpus", "the page corpus is files and graphs, built by a tool of its own",
			[]string{"github.com/chromedp", module + "browser"}},
		{"internal/order", "the label order reads profile names from testbed/profiles, not the emulator",
			[]string{module + "testbed/", module + "experiment"}},
		{"figure", "every experiment draws with it, and the report imports every experiment",
			[]string{module + "report", module + "experiment", module + "store"}},
		{"transport", "transports hand records up", []string{module + "store", module + "experiment", module + "server"}},
		{"server", "the server hands records up", []string{module + "store", module + "experiment"}},
		{"protocol", "the table of transports is a leaf", []string{module + "store", module + "experiment", module + "transport", module + "server"}},
	}
	g := graph(t)
	for _, f := range floors {
		p, ok := g[f.pkg]
		require.True(t, ok, "no package %s", f.pkg)
		for _, dep := range p.Deps {
			for _, bad := range f.not {
				// "testbed/" is the testbed itself, its leaves allowed.
				if strings.HasSuffix(bad, "/") {
					if dep == strings.TrimSuffix(bad, "/") {
						t.Errorf("%s links %s: %s", f.pkg, dep, f.why)
					}
					continue
				}
				if within(dep, bad) {
					t.Errorf("%s links %s: %s", f.pkg, dep, f.why)
				}
			}
		}
	}
}

// TestExperimentsDoNotReachEachOther: no experiment links another, even
// through a third package; what two share goes to package experiment or
// experiment/internal. experiment/all registers them all.
func TestExperimentsDoNotReachEachOther(t *testing.T) {
	g := graph(t)
	name := func(path string) string { // "experiment/web/x" -> "web"
		rest, ok := strings.CutPrefix(path, "experiment/")
		if !ok {
			return ""
		}
		n, _, _ := strings.Cut(rest, "/")
		if n == "all" || n == "internal" {
			return ""
		}
		return n
	}
	seen := 0
	for path, p := range g {
		own := name(path)
		if own == "" {
			continue
		}
		seen++
		for _, dep := range p.Deps {
			if other := name(strings.TrimPrefix(dep, module)); other != "" && other != own && strings.HasPrefix(dep, module) {
				t.Errorf("experiment %s (%s) links experiment %s (%s)", own, path, other, dep)
			}
		}
	}
	require.GreaterOrEqual(t, seen, 7, "the experiments were found")
}

package all_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/all"
)

// TestOneListOfExperiments: Order names every registered experiment once
// and nothing else, and every list of them the docs keep follows it:
// the tables of experiment/README.md and docs/experiments/README.md, the
// README's main job, and the package doc's folders; each experiment's
// README has its usage line and fixed sections.
func TestOneListOfExperiments(t *testing.T) {
	require.Equal(t, all.Order, experiment.Names(), "Order is the registry, in order")
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|")
	for _, f := range []string{"../README.md", "../../docs/experiments/README.md"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var names []string
		for _, m := range row.FindAllStringSubmatch(string(b), -1) {
			if !strings.HasPrefix(m[1], "-") {
				names = append(names, m[1])
			}
		}
		require.Equal(t, all.Order, names, "%s: its table of experiments", f)
	}
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	demo := regexp.MustCompile(`make demo .*\(([^)]*)\)`).FindStringSubmatch(string(b))
	require.Len(t, demo, 2, "the README's main job lists the experiments")
	at := -1
	for _, name := range all.Order {
		i := strings.Index(demo[1], name)
		require.Greater(t, i, at, "README's main job: %s, in Order", name)
		at = i
	}
	doc, err := os.ReadFile("../experiment.go")
	require.NoError(t, err)
	dirs, err := filepath.Glob("../*/README.md")
	require.NoError(t, err)
	require.Len(t, dirs, len(all.Order), "a README per experiment")
	for _, readme := range dirs {
		dir := filepath.Base(filepath.Dir(readme))
		require.Contains(t, string(doc[:strings.Index(string(doc), "package experiment")]), dir, "the package doc names the folder %s", dir)
		b, err := os.ReadFile(readme)
		require.NoError(t, err)
		for _, section := range []string{"`doxlab experiment ", "- **Reproduces**:", "- **Stores**:", "- **Summary**:"} {
			require.Contains(t, string(b), section, readme)
		}
	}
}

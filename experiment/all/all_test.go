package all_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/all"
)

// TestOneListOfExperiments: Order names every registered experiment once
// and nothing else; what lists them (imports.go, the tables of
// experiment/README.md and docs/experiments/README.md, the README's main
// job, the package doc) is as go generate writes it from the registry;
// each experiment's README has its usage line and fixed sections.
func TestOneListOfExperiments(t *testing.T) {
	require.Equal(t, all.Order, experiment.Names(), "Order is the registry, in order")
	for _, gen := range [][]string{{"./internal/genimports", "-check", ".."}, {"./internal/gendocs", "-check", "../.."}} {
		out, err := exec.Command("go", append([]string{"run", "-trimpath"}, gen...)...).CombinedOutput() // testutil.Doxlab says why
		require.NoError(t, err, "%s", out)
	}
	doc, err := os.ReadFile("../doc.go")
	require.NoError(t, err)
	dirs, err := filepath.Glob("../*/README.md")
	require.NoError(t, err)
	require.Len(t, dirs, len(all.Order), "a README per experiment")
	for _, readme := range dirs {
		dir := filepath.Base(filepath.Dir(readme))
		require.Contains(t, string(doc), dir, "the package doc names the folder %s", dir)
		b, err := os.ReadFile(readme)
		require.NoError(t, err)
		for _, section := range []string{"`doxlab experiment ", "- **Reproduces**:", "- **Stores**:", "- **Summary**:"} {
			require.Contains(t, string(b), section, readme)
		}
	}
}

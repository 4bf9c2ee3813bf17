package corpus

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenerateReproducesCorpus: 'go generate ./web' writes the committed
// corpus byte for byte, so the generator and the pages cannot drift.
func TestGenerateReproducesCorpus(t *testing.T) {
	out := filepath.Join(t.TempDir(), "corpus")
	cmd := exec.Command("go", "run", "-trimpath", "./internal/gencorpus", out) // testutil.Doxlab says why
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Run())
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			m[rel] = b
			return err
		}))
		return m
	}
	want, got := files("corpus"), files(out)
	require.Equal(t, len(want), len(got), "same files")
	for name, b := range want {
		require.Equal(t, b, got[name], "%s differs: run go generate ./web", name)
	}
}

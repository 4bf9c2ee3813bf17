package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzFile fuzzes what reads a file doxlab is given (a config, a spec):
// seeded with the files at examples (paths from the test's package) and
// with seeds, each input is written to a file whose path fn reads.
func FuzzFile(f *testing.F, examples []string, seeds []string, fn func(t *testing.T, path string)) {
	for _, name := range examples {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "input.yaml")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fn(t, path)
	})
}

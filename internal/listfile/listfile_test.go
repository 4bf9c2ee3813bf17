package listfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestEach(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(p, []byte("# a list\na\n\n  b  # the second\nbad\n"), 0o644)
	var got []string
	var lines []int
	err := Each(p, func(n int, line string) error {
		if line == "bad" {
			return errors.New("not an entry")
		}
		got, lines = append(got, line), append(lines, n)
		return nil
	})
	if err == nil || err.Error() != p+":5: not an entry" {
		t.Errorf("error %v", err)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "b" || lines[1] != 4 {
		t.Errorf("entries %q at %v", got, lines)
	}
	if err := Each(filepath.Join(t.TempDir(), "none"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

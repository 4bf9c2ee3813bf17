package listfile

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestEachInAsSaved: a file as editors save it (a byte order mark, CRLF
// lines) reads as its entries, the first one too; a line past the limit
// is an error naming the file, not a line cut in two.
func TestEachInAsSaved(t *testing.T) {
	var got []string
	err := EachIn(strings.NewReader("\ufeff192.0.2.1\r\n# x\r\n192.0.2.2 # a note, with a comma\r\n"), "t.txt", func(_ int, line string) error {
		got = append(got, line)
		return nil
	})
	if err != nil || len(got) != 2 || got[0] != "192.0.2.1" || got[1] != "192.0.2.2" {
		t.Errorf("entries %q, error %v", got, err)
	}
	err = EachIn(strings.NewReader("a\n"+strings.Repeat("b", maxLine+1)+"\n"), "t.txt", func(int, string) error { return nil })
	if !errors.Is(err, bufio.ErrTooLong) || !strings.HasPrefix(err.Error(), "t.txt: ") {
		t.Errorf("a line too long: %v", err)
	}
}

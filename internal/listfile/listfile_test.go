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

// TestReadBounded: a file read whole is read as it is up to MaxWhole
// octets; a larger one, and a device that never ends, are refused with
// the path named, having read no more than the bound.
func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(small, []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(small); err != nil || string(b) != "name: x\n" {
		t.Errorf("a small file: %q, %v", b, err)
	}
	edge := filepath.Join(dir, "edge")
	for size, ok := range map[int64]bool{MaxWhole: true, MaxWhole + 1: false} {
		if err := os.Truncate(edge, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		f, err := os.Create(edge)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil { // sparse: no disk taken
			t.Fatal(err)
		}
		f.Close()
		b, err := Read(edge)
		if ok && (err != nil || int64(len(b)) != size) {
			t.Errorf("%d octets: %d read, %v", size, len(b), err)
		}
		if !ok && (err == nil || !strings.HasPrefix(err.Error(), edge+": over 16 MiB")) {
			t.Errorf("%d octets: %v", size, err)
		}
	}
	if _, err := Read("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: over") {
		t.Errorf("/dev/zero: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

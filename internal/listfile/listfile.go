// Package listfile reads the line-per-entry files doxlab takes (targets,
// pages, blocklists, hosts, query mixes): # starts a comment, blank
// lines are skipped, and an entry that does not parse is named by file
// and line. Read reads the files doxlab takes whole (specs, profiles,
// configs, certificates), bounded.
package listfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxLine bounds a line: longer is an error, not a line cut in two.
const maxLine = 1 << 20

// Each calls f with each entry of the file at path, trimmed, and its
// line number (from 1). An error of f comes back as "PATH:LINE: error",
// one reading the file as "PATH: error"; one opening it as it is.
func Each(path string, f func(n int, line string) error) error {
	return EachNoted(path, func(n int, line, _ string) error { return f(n, line) })
}

// EachIn is Each of what r reads, named path in its errors. A byte
// order mark before the first line (as some editors save a file) is
// not part of the first entry.
func EachIn(r io.Reader, path string, f func(n int, line string) error) error {
	return eachNoted(r, path, func(n int, line, _ string) error { return f(n, line) })
}

// EachNoted is Each, handing f each entry's comment too (what follows
// its #, trimmed; "" for none).
func EachNoted(path string, f func(n int, line, note string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	return eachNoted(file, path, f)
}

func eachNoted(r io.Reader, path string, f func(n int, line, note string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		line, note, _ := strings.Cut(text, "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if err := f(n, line, strings.TrimSpace(note)); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// MaxWhole bounds a file read whole (a spec, a profile, a config, a
// certificate or key): each is kilooctets, so a larger one is a path
// mistaken for another, or a device, and is refused before it fills
// memory (/dev/zero given as a CA exhausted it).
const MaxWhole = 16 << 20

// Read reads the whole file at path, refusing one of more than MaxWhole
// octets with an error naming it.
func Read(path string) ([]byte, error) {
	return ReadAtMost(path, MaxWhole, "any spec, config, profile or certificate")
}

// ReadAtMost reads the whole file at path, refusing one of more than
// limit octets, having read no more, with an error naming it and what
// the limit bounds (what, as in "more than WHAT holds").
func ReadAtMost(path string, limit int, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s: over %d MiB, more than %s holds", path, limit>>20, what)
	}
	return b, nil
}

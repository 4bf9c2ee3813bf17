// Package listfile reads the line-per-entry files doxlab takes (targets,
// pages, blocklists, hosts): # starts a comment, blank lines are skipped,
// and an entry that does not parse is named by file and line.
package listfile

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Each calls f with each entry of the file at path, trimmed, and its
// line number (from 1). An error of f comes back as "PATH:LINE: error";
// one opening or reading the file comes back as it is.
func Each(path string, f func(n int, line string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if err := f(n, line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

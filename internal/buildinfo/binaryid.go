package buildinfo

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"sync"
)

// BinaryID is the Go build ID of the running binary, as `go tool buildid`
// prints it: it changes with anything built into the binary, where
// Version names a commit (a development build's uncommitted changes,
// or a commit read from the source tree, share one). What a binary keeps
// for itself to trust later (a report's summaries) is marked with it;
// "" where it cannot be read.
var BinaryID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if f, err := elf.Open(exe); err == nil {
		defer f.Close()
		// An ELF binary keeps it in a note: name size, data size and
		// type (4 octets each), the name "Go" padded to 4, the ID.
		if s := f.Section(".note.go.buildid"); s != nil {
			if b, err := s.Data(); err == nil && len(b) > 16 {
				n := int(f.ByteOrder.Uint32(b[4:8]))
				return string(b[16:min(16+n, len(b))]) // the rest is padding
			}
		}
		return ""
	}
	// Mach-O and PE binaries keep it as a string at the start of their
	// text: \xff Go build ID: "ID"\n \xff.
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	const mark = "\xff Go build ID: \""
	i := bytes.Index(head[:n], []byte(mark))
	if i < 0 {
		return ""
	}
	id := head[i+len(mark) : n]
	if j := bytes.IndexByte(id, '"'); j >= 0 {
		return string(id[:j])
	}
	return ""
})

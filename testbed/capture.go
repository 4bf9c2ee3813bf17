package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// capture writes a pcap with nanosecond timestamps and raw IP link type,
// readable by tshark and Wireshark. The emulator writes on its hot path,
// so a failed write (a full disk) is kept, not returned: close says it,
// and nothing more is written to the broken file.
type capture struct {
	mu   sync.Mutex
	name string
	f    *os.File
	b    *bufio.Writer
	w    *pcapgo.Writer
	err  error // the first write's or flush's that failed
}

func newCapture(dir, name string) (*capture, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	c := &capture{name: name, f: f, b: bufio.NewWriterSize(f, 1<<16)}
	c.w = pcapgo.NewWriterNanos(c.b)
	if err := c.w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

func (c *capture) write(t time.Time, data []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = c.w.WritePacket(gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(data), Length: len(data)}, data)
	}
	c.mu.Unlock()
}

func (c *capture) flush() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = c.b.Flush()
	}
	c.mu.Unlock()
}

// close flushes and closes the file, and says why it is short if a
// write failed.
func (c *capture) close() error {
	if c == nil {
		return nil
	}
	c.flush()
	err := errors.Join(c.err, c.f.Close())
	if err != nil {
		return fmt.Errorf("capture %s: %w", c.name, err)
	}
	return nil
}

// WritePcap writes packets (raw IPv4, as a Sniff returns them) into a
// pcap file in dir, as Spec.PcapDir's captures are written.
func WritePcap(dir, name string, pkts []Packet) error {
	c, err := newCapture(dir, name)
	if err != nil {
		return err
	}
	for _, p := range pkts {
		c.write(p.Time, p.Data)
	}
	return c.close()
}

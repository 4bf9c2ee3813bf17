package overhead

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gopacket/gopacket/pcapgo"
)

// ReadPcap reads a raw-IP capture (the testbed's link captures).
func ReadPcap(path string) ([]Raw, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Raw
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, Raw{Time: ci.Timestamp, Data: data})
	}
}

//go:build !linux

package confine

import (
	"net/netip"

	"github.com/doxlab/doxlab/internal/blocklist"
)

// Net is a confined network; there is none on this system.
type Net struct {
	NS   string
	Stub netip.Addr
}

// New fails: confinement needs Linux.
func New(*blocklist.Policy) (*Net, error) { return nil, ErrUnsupported }

// SetPolicy fails: confinement needs Linux.
func (c *Net) SetPolicy(*blocklist.Policy) error { return ErrUnsupported }

// Refused fails: confinement needs Linux.
func (c *Net) Refused() ([]Refusal, int, error) { return nil, 0, ErrUnsupported }

// Close does nothing.
func (c *Net) Close() error { return nil }

//go:build !linux

package testbed

import (
	"context"
	"errors"
	"os/exec"
	"time"
)

// ErrUnsupported is the testbed asked for off Linux: it is network
// namespaces, veth pairs and packet sockets, all Linux's.
var ErrUnsupported = errors.New("the testbed needs Linux (network namespaces and packet sockets)")

// Testbed is a running testbed; there is none off Linux.
type Testbed struct{ State }

// Start fails off Linux.
func Start(Spec) (*Testbed, error) { return nil, ErrUnsupported }

// Close does nothing.
func (tb *Testbed) Close() error { return nil }

// Down fails off Linux.
func Down(string) error { return ErrUnsupported }

// Command is a command that fails to start off Linux.
func (st *State) Command(host string, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Err = ErrUnsupported
	return cmd
}

// Run fails off Linux.
func (st *State) Run(string, func() error) error { return ErrUnsupported }

// SetProfile fails off Linux.
func (tb *Testbed) SetProfile(string, Profile) error { return ErrUnsupported }

// SetProfile fails off Linux.
func SetProfile(string, string, Profile) error { return ErrUnsupported }

// Stats is empty off Linux.
func (tb *Testbed) Stats() Stats { return Stats{} }

// Check fails off Linux.
func (tb *Testbed) Check(context.Context, Profile, CheckOptions) (*CheckResult, error) {
	return nil, ErrUnsupported
}

// MeasureLoadedRTT fails off Linux.
func (tb *Testbed) MeasureLoadedRTT(context.Context, Profile, time.Duration, string) (*LoadedRTT, error) {
	return nil, ErrUnsupported
}

// Cross has nothing off Linux.
func (tb *Testbed) Cross(string) (CrossStats, bool) { return CrossStats{}, false }

// Sniff is a link capture; there is none off Linux.
type Sniff struct{}

// Sniff fails off Linux.
func (tb *Testbed) Sniff(string) (*Sniff, error) { return nil, ErrUnsupported }

// SniffLoopback fails off Linux.
func SniffLoopback() (*Sniff, error) { return nil, ErrUnsupported }

// Record has nothing off Linux.
func (s *Sniff) Record() func() ([]Packet, error) { return s.Stop }

// Stop has nothing off Linux.
func (s *Sniff) Stop() ([]Packet, error) { return nil, ErrUnsupported }

// NetemAvailable fails off Linux.
func NetemAvailable() error { return ErrUnsupported }

// Alive is false off Linux: no testbed runs here.
func (st *State) Alive() bool { return false }

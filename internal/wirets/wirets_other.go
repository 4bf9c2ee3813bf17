//go:build !linux

package wirets

import (
	"errors"
	"syscall"
	"time"
)

// Enable is not supported here: records have no wire times.
func Enable(syscall.RawConn) error { return errors.New("kernel timestamps need Linux") }

// OOBSize is room for control messages.
const OOBSize = 0

// RX finds nothing off Linux.
func RX([]byte) (time.Time, bool) { return time.Time{}, false }

// TXRequest asks for nothing off Linux.
func TXRequest() []byte { return nil }

// TX finds nothing off Linux.
func TX(syscall.RawConn, time.Duration) (time.Time, bool) { return time.Time{}, false }

// Drain has nothing to drain off Linux.
func Drain(syscall.RawConn) {}

//go:build !linux

package verify

import "syscall"

// tfoConnect does nothing off Linux, where TCP_FASTOPEN_CONNECT is not
// had: TCP Fast Open support is reported as not seen.
func tfoConnect(_, _ string, _ syscall.RawConn) error { return nil }

// synDataAcked is false off Linux: TCP_INFO's SYN-data flag is Linux's.
func synDataAcked(uintptr) bool { return false }

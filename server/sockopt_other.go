//go:build !linux

package server

// setQuickAck does nothing: TCP_QUICKACK is Linux's. Elsewhere a client
// that waits for the server's ACK (Nagle) waits for the delayed one.
func setQuickAck(uintptr) {}

// setNotSentLowat does nothing off Linux: a client that reads nothing
// parks what the kernel's buffers hold before a write blocks and the
// pool sees it stalled.
func setNotSentLowat(uintptr, int) {}

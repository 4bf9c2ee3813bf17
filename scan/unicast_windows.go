package scan

import "syscall"

// setUnicast turns off SO_BROADCAST, which Go sets on every UDP socket.
func setUnicast(fd uintptr) error {
	return syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 0)
}

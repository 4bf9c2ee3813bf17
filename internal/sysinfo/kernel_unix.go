//go:build unix

package sysinfo

import "golang.org/x/sys/unix"

// Kernel is the machine's kernel as runs record it: "Linux 6.1.0 x86_64
// preempt=voluntary", or "" when it cannot be told.
func Kernel() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	k := unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	if p := Preemption(); p != "" {
		k += " preempt=" + p
	}
	return k
}

package sysinfo

import "runtime"

// Kernel is the machine's kernel as runs record it; on Windows, the
// system and architecture Go was built for.
func Kernel() string { return "Windows " + runtime.GOARCH }

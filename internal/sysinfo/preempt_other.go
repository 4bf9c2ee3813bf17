//go:build !linux

package sysinfo

// preemption is "" off Linux: the model is the Linux kernel's.
func preemption() string { return "" }

//go:build !linux

package testutil

import "testing"

// Rootless runs a package's tests as Main does: user and network
// namespaces are Linux's.
func Rootless(m *testing.M) { Main(m) }

func inRootless() bool { return false }

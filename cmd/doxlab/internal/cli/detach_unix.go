//go:build unix

package cli

import (
	"os/exec"
	"syscall"
)

// detach starts cmd in a session of its own, so it outlives the shell.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

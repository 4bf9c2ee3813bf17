package testutil

import (
	"errors"
	"os/exec"
)

// asUser fails on Windows: the tests that need another user run on Linux.
func asUser(cmd *exec.Cmd, _, _ int) { cmd.Err = errors.New("running as another user needs Unix") }

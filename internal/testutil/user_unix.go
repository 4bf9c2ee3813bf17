//go:build unix

package testutil

import (
	"os/exec"
	"syscall"
)

// asUser runs cmd as uid and gid.
func asUser(cmd *exec.Cmd, uid, gid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}

package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/doxlab/doxlab/internal/netns"
)

// rootlessEnv marks a test binary re-executed by Rootless.
const rootlessEnv = "DOXLAB_TEST_ROOTLESS"

// Rootless runs a package's tests (from its TestMain, in place of Main)
// where they may bind the standard ports (53, 443, 853) on 127.x.y.z,
// which the experiments' loopback net needs: as they are under root;
// otherwise re-executed in a user and network namespace of their own, as
// `unshare -rn` makes, with its loopback up. There the process is root
// of nothing but that namespace: the machine's files are as they were,
// and no packet leaves it. NeedRoot's tests, which need the machine's
// root, are skipped there. Where no user namespace can be made, the
// tests run as they are, and the loopback net's say what they need.
func Rootless(m *testing.M) {
	if os.Geteuid() == 0 {
		if os.Getenv(rootlessEnv) != "" {
			if err := netns.LoopbackUp(); err != nil {
				fmt.Fprintf(os.Stderr, "testutil: the namespace's loopback: %v\n", err)
				os.Exit(2)
			}
		}
		Main(m)
		return
	}
	self, err := os.Executable()
	if err != nil {
		Main(m)
		return
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), rootlessEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	}
	fmt.Fprintf(os.Stderr, "testutil: no user namespace for the loopback net's tests (%v): running them as they are\n", err)
	Main(m)
}

// inRootless says the tests run in Rootless's namespace.
func inRootless() bool { return os.Getenv(rootlessEnv) != "" }

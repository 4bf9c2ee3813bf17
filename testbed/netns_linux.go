package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// inNetns runs f on an OS thread switched into the network namespace ns.
// Sockets and TUN devices f creates stay in that namespace. If the thread
// cannot be switched back it is retired instead of reused.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening namespace %s: %w", ns, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering namespace %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
		runtime.UnlockOSThread()
	} // else: leave the thread locked; Go ends it with this goroutine
	return ferr
}

// openTUN creates the TUN device name in namespace ns and returns its
// non-blocking fd (for writes) and an *os.File on it that reads through
// Go's poller, so a waiting reader never holds an OS thread.
func openTUN(ns, name string) (*os.File, int, error) {
	var fd int
	err := inNetns(ns, func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("opening /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		// IFF_TUN|IFF_NO_PI: bare IP packets, one per read, no offloads,
		// so each packet is scheduled and counted on its own.
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("creating TUN device %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, -1, err
	}
	return os.NewFile(uintptr(fd), name), fd, nil
}

// ip runs iproute2, naming the failing command in its error.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkPrivileges gives one clear error when the testbed cannot work here.
func checkPrivileges() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the testbed needs root: it creates network namespaces and TUN devices (run with sudo)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("the testbed needs /dev/net/tun (load the tun module: modprobe tun): %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("the testbed needs iproute2's ip command (apt-get install iproute2)")
	}
	return nil
}

package testbed

import (
	"fmt"
	"net"
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

// openTUN creates the TUN device name in namespace ns. It returns the
// device's non-blocking fd, into which the emulator writes the packets
// that reach the host, and a packet socket on the device from which it
// reads the packets the host sends: unlike the TUN fd, the socket carries
// the kernel's timestamp of each packet's transmission, so the time the
// emulator takes to wake up is not added to the link's delay. The caller
// must read and discard what queues on the TUN fd: a device that dropped
// its copy instead would report the drop to the sender (NET_XMIT_DROP),
// and TCP would take its segment as unsent.
func openTUN(ns, name string) (tun, tap int, err error) {
	tun, tap = -1, -1
	err = inNetns(ns, func() error {
		var err error
		tun, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("opening /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		// IFF_TUN|IFF_NO_PI: bare IP packets, one per read, no offloads,
		// so each packet is scheduled and counted on its own.
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(tun, unix.TUNSETIFF, ifr); err != nil {
			return fmt.Errorf("creating TUN device %s: %w", name, err)
		}
		tap, err = openTap(name)
		return err
	})
	if err != nil {
		for _, fd := range []int{tun, tap} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		return -1, -1, err
	}
	return tun, tap, nil
}

// openTap opens a non-blocking packet socket that receives, with
// SO_TIMESTAMPNS, the IPv4 packets device name transmits. Only a socket
// for every protocol (ETH_P_ALL) sees a device's outgoing packets; a
// filter keeps those that are outgoing and IPv4, so the packets the
// emulator writes into the device do not wake it.
func openTap(name string) (int, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return -1, fmt.Errorf("packet socket on %s: %w", name, err)
	}
	const (
		ad           = 0xfffff000 // SKF_AD_OFF: ancillary data, not packet bytes
		adProtocol   = 0          // SKF_AD_PROTOCOL
		adPacketType = 4          // SKF_AD_PKTTYPE
	)
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: ad + adPacketType},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.PACKET_OUTGOING, Jf: 3},
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: ad + adProtocol},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.ETH_P_IP, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 18},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	steps := []func() error{
		func() error { return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog) },
		func() error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) },
		func() error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) },
		func() error {
			return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: iface.Index})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("packet socket on %s: %w", name, err)
		}
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ip and tc run iproute2, naming the failing command in the error.
func ip(args ...string) error { return iproute2("ip", args) }
func tc(args ...string) error { return iproute2("tc", args) }

func iproute2(name string, args []string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
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

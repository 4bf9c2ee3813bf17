package testbed

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"unsafe"

	"github.com/doxlab/doxlab/internal/netns"
	"golang.org/x/sys/unix"
)

// inNetns runs f on an OS thread switched into the network namespace ns.
var inNetns = netns.Run

// Every host's interface (dx0) is one end of a veth pair whose other end,
// its port, is in the testbed's switch namespace. The emulator reads what
// a host sends from a packet socket on dx0 (its tap), with the kernel's
// timestamp of the packet's hand-over to the device, and sends what
// reaches the host out of its port, so that it arrives on dx0 from the
// wire. The sent frames also cross the pair into the switch namespace,
// where the kernel forwards those of paths with nothing to emulate (see
// Testbed.kernelPaths). Each host is alone on its segment with
// the emulator, which forwards by IP address, so no host needs ARP: every
// host's interface has the same MAC address and addresses frames to
// itself (IFF_NOARP), and the ports have another, so the switch
// namespace's own stack drops the frames at once (PACKET_OTHERHOST).
var (
	hostMAC = net.HardwareAddr{0x02, 0x64, 0x78, 0, 0, 1} // locally administered, "dx"
	portMAC = net.HardwareAddr{0x02, 0x64, 0x78, 0, 0, 2}
)

// portName is host i's port in the switch namespace.
func portName(i int) string { return "p" + strconv.Itoa(i) }

// addPort creates host i's veth pair, dx0 in namespace ns and its port in
// the switch namespace sw, and brings both up with addr on dx0. Offloads
// are off on dx0: the emulator must see each packet as it goes on the
// wire, whole (no TSO super-packets) and with its checksums filled in.
func addPort(sw, ns string, i int, addr string, mtu int) error {
	port := portName(i)
	steps := [][]string{
		{"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "dx0", "netns", ns},
		{"-n", sw, "link", "set", port, "address", portMAC.String(), "arp", "off", "addrgenmode", "none", "mtu", "65535"},
		{"-n", ns, "link", "set", "dx0", "address", hostMAC.String(), "arp", "off", "addrgenmode", "none", "mtu", strconv.Itoa(mtu)},
		{"-n", ns, "addr", "add", addr, "dev", "dx0"},
	}
	for _, step := range steps {
		if err := ip(step...); err != nil {
			if strings.Contains(err.Error(), "Unknown device type") {
				return fmt.Errorf("the testbed needs veth pairs, which this kernel lacks (modprobe veth): %w", err)
			}
			return err
		}
	}
	if err := inNetns(ns, func() error { return offloadsOff("dx0") }); err != nil {
		return fmt.Errorf("dx0: %w", err)
	}
	if err := ip("-n", sw, "link", "set", port, "up"); err != nil {
		return err
	}
	return ip("-n", ns, "link", "set", "dx0", "up")
}

// offloadsOff turns off checksum offload, scatter-gather, TSO, GSO and GRO
// on device name with the legacy ethtool ioctls (no ethtool binary needed).
func offloadsOff(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// Checksum offload first: the kernel drops the features that need it.
	for _, cmd := range []uint32{unix.ETHTOOL_STXCSUM, unix.ETHTOOL_SSG, unix.ETHTOOL_STSO, unix.ETHTOOL_SGSO, unix.ETHTOOL_SGRO} {
		value := struct{ cmd, data uint32 }{cmd, 0}
		var ifr struct {
			name [unix.IFNAMSIZ]byte
			data unsafe.Pointer
			_    [16]byte
		}
		copy(ifr.name[:], name)
		ifr.data = unsafe.Pointer(&value)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
			return fmt.Errorf("turning offloads off (ethtool command %#x): %w", cmd, errno)
		}
	}
	return nil
}

// openTap opens, inside host namespace ns, a non-blocking packet socket
// on the host's interface dx0 that receives with SO_TIMESTAMPNS the IPv4
// packets the host sends, stamped as the kernel hands them to the device:
// the earliest point the emulator can see them. Only a socket for every
// protocol (ETH_P_ALL) sees a device's outgoing packets; its filter
// (tapFilter) keeps those.
func openTap(ns string) (int, error) {
	return openDx0(ns, tapFilter(nil), 8<<20)
}

// openDx0 opens, inside host namespace ns, a packet socket on dx0
// (packetSocket).
func openDx0(ns string, filter []unix.SockFilter, rcvbuf int) (int, error) {
	fd := -1
	err := inNetns(ns, func() (err error) {
		fd, err = packetSocket("dx0", filter, rcvbuf)
		return err
	})
	return fd, err
}

// packetSocket opens, in this thread's network namespace, a non-blocking
// packet socket for every protocol on the interface ifname, with filter,
// kernel timestamps and a receive buffer of rcvbuf octets: forced past
// rmem_max, which takes the machine's root, or rmem_max in a user
// namespace of one's own.
func packetSocket(ifname string, filter []unix.SockFilter, rcvbuf int) (int, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, fmt.Errorf("packet socket on %s: %w", ifname, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return -1, fmt.Errorf("packet socket on %s: %w", ifname, err)
	}
	err = sockopts(fd,
		func() error { return setFilter(fd, filter) },
		func() error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) },
		func() error {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); !errors.Is(err, unix.EPERM) {
				return err
			}
			return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
		},
		func() error {
			return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: iface.Index})
		})
	if err != nil {
		return -1, fmt.Errorf("packet socket on %s: %w", ifname, err)
	}
	return fd, nil
}

// openPort opens a packet socket on port, in the switch namespace sw, that
// sends packets to the port's host and receives none (protocol 0).
func openPort(sw, port string) (fd, index int, err error) {
	err = inNetns(sw, func() error {
		iface, err := net.InterfaceByName(port)
		if err != nil {
			return err
		}
		index = iface.Index
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return sockopts(fd,
			func() error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20) },
			// Straight to the veth: no qdisc to defer the frame to a softirq.
			func() error { return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1) },
			func() error { return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: index}) })
	})
	if err != nil {
		return -1, 0, fmt.Errorf("packet socket on %s: %w", port, err)
	}
	return fd, index, nil
}

// sockopts runs the steps that set a new socket up, closing it on the
// first error.
func sockopts(fd int, steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			unix.Close(fd)
			return err
		}
	}
	return nil
}

// tapFilter is the classic BPF program of a host's tap: it keeps the IPv4
// packets the host sends except those to the addresses in skip (which the
// kernel forwards itself, so the emulator needs not wake).
func tapFilter(skip []net.IP) []unix.SockFilter {
	const (
		ad           = 0xfffff000 // SKF_AD_OFF: ancillary data, not packet bytes
		adProtocol   = 0          // SKF_AD_PROTOCOL
		adPacketType = 4          // SKF_AD_PKTTYPE
		ipDst        = 16         // offset of the IPv4 destination (SOCK_DGRAM: from the IP header)
	)
	n := uint8(len(skip))
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: ad + adPacketType},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.PACKET_OUTGOING, Jf: n + 4},
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: ad + adProtocol},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.ETH_P_IP, Jf: n + 2},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: ipDst},
	}
	for i, a := range skip {
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: binary.BigEndian.Uint32(a.To4()), Jt: n - uint8(i)})
	}
	return append(prog,
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 18},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0})
}

// setFilter replaces the filter on packet socket fd.
func setFilter(fd int, prog []unix.SockFilter) error {
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

// portCounters reads the packets each port in namespace sw received from
// its host and sent to it, by port name.
func portCounters(sw string) (map[string][2]uint64, error) {
	out, err := exec.Command("ip", "-n", sw, "-s", "-j", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -n %s -s link show: %w", sw, err)
	}
	var links []struct {
		Name  string `json:"ifname"`
		Stats struct {
			RX, TX struct {
				Packets uint64 `json:"packets"`
			}
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("ip -s -j link show: %w", err)
	}
	c := map[string][2]uint64{}
	for _, l := range links {
		c[l.Name] = [2]uint64{l.Stats.RX.Packets, l.Stats.TX.Packets}
	}
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ip and tc run iproute2, naming the failing command in the error;
// tcBatch runs tc once for many commands (tc -batch).
func ip(args ...string) error { return iproute2("ip", args, "") }
func tc(args ...string) error { return iproute2("tc", args, "") }
func tcBatch(ns string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	return iproute2("tc", []string{"-n", ns, "-force", "-batch", "-"}, strings.Join(lines, "\n")+"\n")
}

func iproute2(name string, args []string, stdin string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if stdin != "" {
			args = append(args, "<<", strings.TrimSpace(stdin))
		}
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkPrivileges gives one clear error when the testbed cannot work here.
func checkPrivileges() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the testbed needs root: it creates network namespaces and veth pairs (run with sudo)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("the testbed needs iproute2's ip command (apt-get install iproute2)")
	}
	return nil
}

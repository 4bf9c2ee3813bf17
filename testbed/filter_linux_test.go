package testbed

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/doxlab/doxlab/internal/testutil"
)

// frame is what a packet socket's filter sees of a packet: its type and
// protocol (ancillary data) and, on a SOCK_DGRAM socket, its bytes from
// the network header on.
type frame struct {
	pktType uint32
	proto   uint16
	data    []byte
}

// runBPF runs a classic BPF program over f as the kernel does for the
// instructions doxlab's filters use, and returns the octets it keeps (0:
// dropped). A load past the packet's end drops it, as in the kernel. Any
// other instruction fails the test, so a filter that grows one is checked
// here only once this interpreter learns it.
func runBPF(t *testing.T, prog []unix.SockFilter, f frame) uint32 {
	t.Helper()
	const ad = 0xfffff000
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			size := map[uint16]uint32{unix.BPF_B: 1, unix.BPF_H: 2, unix.BPF_W: 4}[in.Code&0x18]
			switch {
			case in.K == ad+0: // SKF_AD_PROTOCOL, in host order as the kernel gives it
				a = uint32(f.proto)
			case in.K == ad+4: // SKF_AD_PKTTYPE
				a = f.pktType
			case in.K >= ad:
				t.Fatalf("pc %d: ancillary load %#x not modelled", pc, in.K-ad)
			case int(in.K+size) > len(f.data):
				return 0
			default:
				b := f.data[in.K : in.K+size]
				switch size {
				case 1:
					a = uint32(b[0])
				case 2:
					a = uint32(binary.BigEndian.Uint16(b))
				default:
					a = binary.BigEndian.Uint32(b)
				}
			}
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("pc %d: instruction %#x not modelled", pc, in.Code)
		}
	}
	t.Fatalf("the program ran off its end")
	return 0
}

// ipv4To is the first 20 octets of an IPv4 header to dst.
func ipv4To(dst net.IP) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	copy(h[16:], dst.To4())
	return h
}

// TestTapFilterKeepsWhatTheEmulatorCarries checks a host's tap filter
// against what it should keep, for every size of skip list a testbed can
// have (up to its 249 other hosts, where a jump's 8-bit offset has the
// least room): the IPv4 packets the host sends, but those to the hosts
// the kernel carries itself. Each program is also attached to a socket, so
// the kernel's own checker (jumps in range, a return at the end) passes it.
func TestTapFilterKeepsWhatTheEmulatorCarries(t *testing.T) {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(sock)

	addr := func(i int) net.IP { return net.IPv4(10, 200, 0, byte(i+1)) }
	for seed := range testutil.Seeds(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := rng.IntN(250)
		switch seed {
		case 0:
			n = 0
		case 1:
			n = 249
		}
		var skip []net.IP
		for _, i := range rng.Perm(250)[:n] {
			skip = append(skip, addr(i))
		}
		prog := tapFilter(skip)
		require.NoError(t, setFilter(sock, prog), "seed %d: %d skipped: the kernel refuses the program", seed, n)

		for range 400 {
			dst := addr(rng.IntN(250))
			f := frame{pktType: unix.PACKET_OUTGOING, proto: unix.ETH_P_IP, data: ipv4To(dst)}
			switch rng.IntN(6) {
			case 0:
				f.pktType = []uint32{unix.PACKET_HOST, unix.PACKET_BROADCAST, unix.PACKET_MULTICAST, unix.PACKET_OTHERHOST}[rng.IntN(4)]
			case 1:
				f.proto = []uint16{unix.ETH_P_ARP, unix.ETH_P_IPV6, 0x88cc}[rng.IntN(3)]
			case 2:
				f.data = f.data[:rng.IntN(20)] // cut short: no destination to read
			}
			kept := runBPF(t, prog, f)
			want := f.pktType == unix.PACKET_OUTGOING && f.proto == unix.ETH_P_IP && len(f.data) >= 20 &&
				!slices.ContainsFunc(skip, func(s net.IP) bool { return s.Equal(dst) })
			if want {
				require.Equal(t, uint32(1<<18), kept, "seed %d: %d skipped: an outgoing packet to %s dropped", seed, n, dst)
			} else {
				require.Zero(t, kept, "seed %d: %d skipped: %+v kept", seed, n, f)
			}
		}
	}
}

// TestSniffFiltersKeepIPv4 checks the two sniffers' filters: a host's
// sniff keeps IPv4 either way; the loopback's keeps each IPv4 packet once,
// as it leaves.
func TestSniffFiltersKeepIPv4(t *testing.T) {
	types := []uint32{unix.PACKET_HOST, unix.PACKET_OUTGOING, unix.PACKET_BROADCAST, unix.PACKET_OTHERHOST}
	protos := []uint16{unix.ETH_P_IP, unix.ETH_P_IPV6, unix.ETH_P_ARP}
	for _, ty := range types {
		for _, p := range protos {
			f := frame{pktType: ty, proto: p, data: ipv4To(net.IPv4(10, 200, 0, 2))}
			host, lo := runBPF(t, sniffFilter, f), runBPF(t, loopbackFilter, f)
			require.Equal(t, p == unix.ETH_P_IP, host != 0, "sniff, type %d proto %#x", ty, p)
			require.Equal(t, p == unix.ETH_P_IP && ty == unix.PACKET_OUTGOING, lo != 0, "loopback, type %d proto %#x", ty, p)
		}
	}
}

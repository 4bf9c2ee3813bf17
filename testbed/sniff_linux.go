package testbed

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Sniff records the IPv4 packets a host sends and receives on its link,
// each with the kernel's timestamp, from Sniff until Stop: a capture of
// one page load, where Spec.PcapDir would capture a whole run. Nothing
// reads the packets until Stop: they wait in the socket's buffer, so the
// recording wakes no thread while the load it records runs. (Read as they
// came, traced Chromium loads of the Instagram page on fiber were 1-17 %
// slower than the measured ones in three runs, against -2 to +1 % with
// no sniffing: few runs, but a cost with no need.)
type Sniff struct {
	fd int
}

// sniffFilter keeps IPv4 packets either way.
var sniffFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 0xfffff000}, // SKF_AD_OFF + SKF_AD_PROTOCOL
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.ETH_P_IP, Jf: 1},
	{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 18},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},
}

// sniffBuffer holds a page load's packets: some 14,000 full-size ones.
const sniffBuffer = 32 << 20

// Sniff starts recording host's packets.
func (tb *Testbed) Sniff(host string) (*Sniff, error) {
	ns, ok := tb.NS[host]
	if !ok {
		return nil, fmt.Errorf("no host %q", host)
	}
	fd, err := openDx0(ns, sniffFilter, sniffBuffer)
	if err != nil {
		return nil, fmt.Errorf("sniffing %s: %w", host, err)
	}
	return &Sniff{fd: fd}, nil
}

// loopbackFilter keeps IPv4 packets as they are sent: loopback shows a
// packet socket each packet twice, leaving and arriving.
var loopbackFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 0xfffff004}, // SKF_AD_OFF + SKF_AD_PKTTYPE
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.PACKET_OUTGOING, Jf: 3},
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 0xfffff000}, // SKF_AD_OFF + SKF_AD_PROTOCOL
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.ETH_P_IP, Jf: 1},
	{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 18},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},
}

// SniffLoopback starts recording the IPv4 packets on this process's
// loopback interface, each once: the capture of experiments on the
// loopback net. It needs CAP_NET_RAW (root, or a user and network
// namespace of one's own).
func SniffLoopback() (*Sniff, error) {
	fd, err := packetSocket("lo", loopbackFilter, sniffBuffer)
	if err != nil {
		return nil, err
	}
	return &Sniff{fd: fd}, nil
}

// Record reads the packets as they come, on a goroutine of its own,
// rather than leaving them in the socket's buffer: for a capture longer
// than that buffer holds (a whole run). The function it returns ends the
// recording and returns the packets, as Stop does.
func (s *Sniff) Record() func() ([]Packet, error) {
	var pkts []Packet
	var rerr error
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		r := newReceiver(buf)
		for {
			n, ns, err := r.recv(s.fd)
			switch {
			case errors.Is(err, unix.EAGAIN):
				select {
				case <-quit:
					return // drained, and told to stop
				default:
				}
				unix.Poll([]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}, 50) //nolint:errcheck // a wake-up, checked by the next recv
			case err != nil:
				rerr = err
				return
			default:
				pkts = append(pkts, Packet{Time: time.Unix(0, ns), Data: slices.Clone(buf[:n])})
			}
		}
	}()
	return func() ([]Packet, error) {
		close(quit)
		<-done
		rest, err := s.Stop()
		return append(pkts, rest...), errors.Join(rerr, err)
	}
}

// Stop ends the recording and returns its packets, in the order the
// kernel delivered them. Packets beyond the buffer are lost, and Stop
// says so.
func (s *Sniff) Stop() ([]Packet, error) {
	defer unix.Close(s.fd)
	var pkts []Packet
	buf := make([]byte, 65536)
	r := newReceiver(buf)
	for {
		n, ns, err := r.recv(s.fd)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			return pkts, err
		}
		pkts = append(pkts, Packet{Time: time.Unix(0, ns), Data: slices.Clone(buf[:n])})
	}
	if st, err := unix.GetsockoptTpacketStats(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil && st.Drops > 0 {
		return pkts, fmt.Errorf("sniffing: %d packets beyond the buffer were lost", st.Drops)
	}
	return pkts, nil
}

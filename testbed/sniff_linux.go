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

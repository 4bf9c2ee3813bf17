package testbed

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Sniff records the IPv4 packets a host sends and receives on its link,
// each with the kernel's timestamp, from Sniff until Stop: a capture of
// one page load, where Spec.PcapDir would capture a whole run.
type Sniff struct {
	fd   int
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	pkts []Packet
	err  error
}

// Packet is one sniffed IPv4 packet.
type Packet struct {
	Time time.Time
	Data []byte
}

// sniffFilter keeps IPv4 packets either way.
var sniffFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 0xfffff000}, // SKF_AD_OFF + SKF_AD_PROTOCOL
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.ETH_P_IP, Jf: 1},
	{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 18},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},
}

// Sniff starts recording host's packets.
func (tb *Testbed) Sniff(host string) (*Sniff, error) {
	ns, ok := tb.NS[host]
	if !ok {
		return nil, fmt.Errorf("no host %q", host)
	}
	s := &Sniff{fd: -1, stop: make(chan struct{}), done: make(chan struct{})}
	err := inNetns(ns, func() error {
		iface, err := net.InterfaceByName("dx0")
		if err != nil {
			return err
		}
		if s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		return sockopts(s.fd,
			func() error { return setFilter(s.fd, sniffFilter) },
			func() error { return unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) },
			func() error { return unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) },
			func() error {
				return unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: iface.Index})
			})
	})
	if err != nil {
		return nil, fmt.Errorf("sniffing %s: %w", host, err)
	}
	go s.read()
	return s, nil
}

// read drains the socket until Stop, waking at least every 20 ms to see
// whether it was told to.
func (s *Sniff) read() {
	defer close(s.done)
	buf := make([]byte, 65536)
	r := newReceiver(buf)
	for {
		n, ns, err := r.recv(s.fd)
		switch {
		case err == nil:
			s.mu.Lock()
			s.pkts = append(s.pkts, Packet{Time: time.Unix(0, ns), Data: slices.Clone(buf[:n])})
			s.mu.Unlock()
			continue
		case !errors.Is(err, unix.EAGAIN):
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		select {
		case <-s.stop:
			return
		default:
		}
		unix.Poll([]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}, 20)
	}
}

// Stop ends the recording and returns its packets, in the order the
// kernel delivered them.
func (s *Sniff) Stop() ([]Packet, error) {
	close(s.stop)
	<-s.done
	unix.Close(s.fd)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pkts, s.err
}

package testbed

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/doxlab/doxlab/internal/stats"

	"golang.org/x/sys/unix"
)

const probeSize = 28 + 32 // IPv4 and ICMP headers, 32 octets of payload

// udpIn opens a UDP socket inside host.
func (tb *Testbed) udpIn(host string, laddr string, raddr *net.UDPAddr) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := tb.Run(host, func() error {
		var err error
		if raddr != nil {
			c, err = net.DialUDP("udp4", nil, raddr)
		} else {
			var a *net.UDPAddr
			if a, err = net.ResolveUDPAddr("udp4", laddr); err == nil {
				c, err = net.ListenUDP("udp4", a)
			}
		}
		return err
	})
	return c, err
}

// checkRTT pings the server host from the client host with ICMP echo:
// the server's kernel answers, so no application wake-up is measured. Both
// ends are the kernel's software timestamps at the client's link, the
// request's as it is handed to the device (SCM_TSTAMP_SCHED, taken before
// the emulator's tap sees the packet, where a driver's timestamp would
// come after) and the reply's as it arrives (SO_TIMESTAMPING), so the RTT
// is the link's, without the client's own socket calls. Where the
// kernel gives no transmit timestamp, the time just before sendto stands
// in.
func (tb *Testbed) checkRTT(ctx context.Context, client, server string, o CheckOptions, res *CheckResult, each func(sent int64, rtt time.Duration)) error {
	// Two sockets: a transmit timestamp queued on a socket wakes whoever
	// waits on it, and that wake-up would be paid inside sendto. The
	// sending socket's filter keeps it from queueing the replies too.
	var fd, tx int
	err := tb.Run(client, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP); err != nil {
			return err
		}
		if tx, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP); err != nil {
			unix.Close(fd)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("ICMP socket in %s: %w", client, err)
	}
	defer unix.Close(fd)
	defer unix.Close(tx)
	drop := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
	unix.SetsockoptSockFprog(tx, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: 1, Filter: &drop[0]})
	// OPT_ID numbers the timestamps by send: a probe the kernel forwards
	// between the ports (profile none) is stamped again as it leaves the
	// second one, and only the first stamp of each send counts.
	unix.SetsockoptInt(tx, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, unix.SOF_TIMESTAMPING_TX_SCHED|
		unix.SOF_TIMESTAMPING_SOFTWARE|unix.SOF_TIMESTAMPING_OPT_TSONLY|unix.SOF_TIMESTAMPING_OPT_ID)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, unix.SOF_TIMESTAMPING_RX_SOFTWARE|unix.SOF_TIMESTAMPING_SOFTWARE)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1})
	dst := &unix.SockaddrInet4{}
	copy(dst.Addr[:], tb.IP(server).To4())
	id := os.Getpid() & 0xffff
	// Wall-clock ns: the kernel's timestamps are CLOCK_REALTIME. A reply
	// can come back before its request's transmit timestamp is read, so
	// the two are paired only at the end.
	sent, recv := make([]int64, o.Probes), make([]int64, o.Probes)
	var got atomic.Int64
	done := make(chan struct{})
	var stop atomic.Bool
	go func() {
		defer close(done)
		buf, oob := make([]byte, 1500), make([]byte, 128)
		for got.Load() < int64(o.Probes) && !stop.Load() {
			n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
			if err != nil {
				if err == unix.EAGAIN || err == unix.EINTR {
					continue
				}
				return
			}
			at := kernelTime(oob[:oobn])
			if n < 28 || at == 0 {
				continue
			}
			ihl := int(buf[0]&0x0f) * 4
			icmp := buf[ihl:n]
			if len(icmp) < 8 || icmp[0] != 0 || int(binary.BigEndian.Uint16(icmp[4:])) != id {
				continue // not our echo reply
			}
			if seq := int(binary.BigEndian.Uint16(icmp[6:])); seq < len(recv) && recv[seq] == 0 {
				recv[seq] = at
				got.Add(1)
			}
		}
	}()
	msg := make([]byte, probeSize-20) // ICMP header and 32 octets after the IP header
	for i := range o.Probes {
		if ctx.Err() != nil {
			break
		}
		msg[0], msg[1] = 8, 0 // echo request
		binary.BigEndian.PutUint16(msg[4:], uint16(id))
		binary.BigEndian.PutUint16(msg[6:], uint16(i))
		msg[2], msg[3] = 0, 0
		binary.BigEndian.PutUint16(msg[2:], checksum(msg))
		before := time.Now().UnixNano()
		if err := unix.Sendto(tx, msg, 0, dst); err != nil {
			return fmt.Errorf("sending ICMP echo: %w", err)
		}
		sent[i] = txTime(tx, uint32(i), before)
		time.Sleep(o.Interval)
	}
	deadline := time.Now().Add(res.ConfiguredRTT + time.Second)
	for got.Load() < int64(o.Probes) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	<-done
	var rtts []time.Duration
	for i := range sent {
		if sent[i] != 0 && recv[i] != 0 {
			rtts = append(rtts, time.Duration(recv[i]-sent[i]))
			if each != nil {
				each(sent[i], time.Duration(recv[i]-sent[i]))
			}
		}
	}
	res.Probes, res.Lost = o.Probes, o.Probes-len(rtts)
	if len(rtts) == 0 {
		return fmt.Errorf("no RTT probe came back")
	}
	errs := make([]time.Duration, len(rtts))
	for i, r := range rtts {
		errs[i] = r - res.ConfiguredRTT
	}
	slices.Sort(errs)
	pct := func(q float64) time.Duration { return stats.DurationQuantile(errs, q) }
	res.ErrP50, res.ErrP90, res.ErrP99, res.ErrMax = pct(0.5), pct(0.9), pct(0.99), errs[len(errs)-1]
	return nil
}

// txTime returns the kernel's transmit timestamp of send number id on
// fd, from its error queue, skipping the later stamps of earlier sends; the
// device stamps it within sendto, so a short wait suffices. It returns
// fallback when none comes.
func txTime(fd int, id uint32, fallback int64) int64 {
	oob := make([]byte, 256)
	for range 20 {
		_, oobn, _, _, err := unix.Recvmsg(fd, nil, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err == nil {
			ee := cmsgData(oob[:oobn], unix.SOL_IP, unix.IP_RECVERR)
			if len(ee) < int(unsafe.Sizeof(unix.SockExtendedErr{})) || (*unix.SockExtendedErr)(unsafe.Pointer(&ee[0])).Data != id {
				continue
			}
			if t := kernelTime(oob[:oobn]); t != 0 {
				return t
			}
			continue
		}
		if err != unix.EAGAIN {
			break
		}
		unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLERR}}, 1)
	}
	return fallback
}

// stealTime reads the machine's stolen CPU time so far (/proc/stat's
// steal column, summed over CPUs), 0 where there is none.
func stealTime() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, _ := strconv.ParseInt(f[8], 10, 64)
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// pauseCounts are the process's GC stop-the-world pauses so far, by
// runtime/metrics bucket.
type pauseCounts struct {
	counts  []uint64
	buckets []float64 // seconds; bucket i is [buckets[i], buckets[i+1])
}

const gcPauseMetric = "/sched/pauses/total/gc:seconds"

// gcCycles is how many collections this process has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func gcPauses() pauseCounts {
	s := []metrics.Sample{{Name: gcPauseMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return pauseCounts{}
	}
	h := s[0].Value.Float64Histogram()
	return pauseCounts{counts: slices.Clone(h.Counts), buckets: h.Buckets}
}

// since gives how many pauses came after p0, and the upper bound of the
// longest one's bucket.
func (p pauseCounts) since(p0 pauseCounts) (n int, longest time.Duration) {
	for i := range p.counts {
		d := p.counts[i]
		if i < len(p0.counts) {
			d -= p0.counts[i]
		}
		if d == 0 {
			continue
		}
		n += int(d)
		if hi := p.buckets[i+1]; !math.IsInf(hi, 1) {
			longest = time.Duration(hi * float64(time.Second))
		} else {
			longest = time.Duration(p.buckets[i] * float64(time.Second))
		}
	}
	return n, longest
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

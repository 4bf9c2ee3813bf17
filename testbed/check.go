package testbed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/doxlab/doxlab/internal/stats"

	"golang.org/x/sys/unix"

	"github.com/doxlab/doxlab/internal/sysinfo"
)

// CheckResult is what 'testbed check' measured for one profile on the
// first host's link (the client's) towards the second (the server).
type CheckResult struct {
	Profile       string        `json:"profile"`
	ConfiguredRTT time.Duration `json:"configured_rtt"` // delays plus the probe's serialization
	Probes        int           `json:"probes"`
	Lost          int           `json:"lost"`
	// RTT error: measured minus configured, at the percentiles.
	ErrP50, ErrP90, ErrP99, ErrMax time.Duration
	// Steal is the CPU time the hypervisor took from this machine's
	// vCPUs while the probes ran, summed over them: a vCPU that is not
	// running delivers nothing on time, so on a VM it explains much of
	// the error's tail. Zero on bare metal.
	Steal time.Duration
	// GCPauses and GCPauseMax are the stop-the-world pauses of the
	// garbage collector of the process that runs the emulator while the
	// probes ran (bucket bounds, within 25 %): a pause stops the emulator
	// too, and a probe that crosses one arrives that much late.
	GCPauses   int
	GCPauseMax time.Duration
	// Preemption is the kernel's preemption model (sysinfo.Preemption):
	// under none, a busy machine delays the emulator's threads.
	Preemption string
	// LateP50 and LateP99 are how late the emulator delivered the
	// probes' packets (bucket bounds, within 25 %): its own share of the
	// error. The rest is the kernels' work along the path.
	LateP50, LateP99 time.Duration
	// LateMax is the latest of them: one late probe is the error's p99
	// over 100 probes, but not the lateness's p99 over their packets.
	LateMax time.Duration
	// Throughput per direction against the configured rate (0: unlimited,
	// not measured); for a trace, its mean rate, and what arrived per
	// 100 ms window against what the trace delivers in it (Up/DownTrace).
	UpRate, UpAchieved     float64 // bit/s
	DownRate, DownAchieved float64
	UpTrace, DownTrace     *TraceFit `json:",omitempty"`
	// UpQueue, DownQueue: a CoDel, FQ-CoDel or PIE queue's delay and drops
	// during the throughput run.
	UpQueue, DownQueue *QueueStats `json:",omitempty"`
	// EmulatorCPU is the emulator's CPU during the throughput runs, as a
	// fraction of one core.
	EmulatorCPU float64
	FIFO        bool // the writer threads ran SCHED_FIFO
}

// CheckOptions tune the check; zero values take the defaults.
type CheckOptions struct {
	Probes         int           // RTT probes; default 300
	Interval       time.Duration // between probes; default 5 ms
	Throughput     time.Duration // per direction; default 2 s (0 with SkipThroughput)
	SkipThroughput bool
}

const probeSize = 28 + 32 // IPv4 and ICMP headers, 32 octets of payload

// Check applies profile p to the first host's link and measures it.
func (tb *Testbed) Check(ctx context.Context, p Profile, o CheckOptions) (_ *CheckResult, err error) {
	if tb.child != nil { // measured by the emulator's process, whose clocks and counters it reads
		r, err := tb.remote(ctx, request{Op: "check", Profile: &p, Check: &o}, checkTimeout)
		if err != nil {
			return nil, err
		}
		if r.Check == nil {
			return nil, fmt.Errorf("testbed %s: the check came back empty", tb.Spec.Name)
		}
		tb.mu.Lock()
		tb.Profiles[tb.Spec.Hosts[0]] = p
		tb.mu.Unlock()
		return r.Check, nil
	}
	if len(tb.Spec.Hosts) < 2 {
		return nil, fmt.Errorf("check needs two hosts")
	}
	if o.Probes == 0 {
		o.Probes = 300
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Millisecond
	}
	if o.Throughput == 0 {
		o.Throughput = 2 * time.Second
	}
	client, server := tb.Spec.Hosts[0], tb.Spec.Hosts[1]
	// The check measures the link alone: cross traffic pauses meanwhile,
	// and resumes after it.
	bare := p
	bare.Cross = Cross{}
	if err := tb.SetProfile(client, bare); err != nil {
		return nil, err
	}
	if p.Cross.flows() > 0 {
		defer func() {
			if rerr := tb.SetProfile(client, p); err == nil {
				err = rerr
			}
		}()
	}
	res := &CheckResult{Profile: p.Name, UpRate: p.Up.MeanRate(), DownRate: p.Down.MeanRate()}
	// A probe's serialization; on a trace, the wait for an opportunity
	// varies, and is left out.
	serial := func(d Direction) time.Duration {
		if d.Rate == 0 {
			return 0
		}
		return time.Duration(float64(probeSize*8) / d.Rate * float64(time.Second))
	}
	res.ConfiguredRTT = p.Up.Delay + p.Down.Delay + serial(p.Up) + serial(p.Down)
	// Packets of an earlier profile or check may still be queued on the
	// link: the probes would wait behind them.
	tb.drain(5 * time.Second)
	steal0, gc0 := stealTime(), gcPauses()
	var late0 lateCounts
	if tb.emu != nil {
		late0 = tb.emu.lateness()
	}
	if err := tb.checkRTT(ctx, client, server, o, res, nil); err != nil {
		return nil, err
	}
	res.Steal = stealTime() - steal0
	res.GCPauses, res.GCPauseMax = gcPauses().since(gc0)
	if tb.emu != nil {
		late := tb.emu.lateness().since(late0)
		res.LateP50, res.LateP99, res.LateMax = late.quantile(0.5), late.quantile(0.99), late.quantile(1)
	}
	res.Preemption = sysinfo.Preemption()
	if !o.SkipThroughput {
		cpu := func() time.Duration {
			if tb.emu == nil {
				return 0 // netem: the kernel's work, not measurable here
			}
			return tb.emu.cpu()
		}
		cpu0, t0 := cpu(), time.Now()
		var err error
		for _, dir := range []struct {
			d        Direction
			from, to string
			stage    func() *stage
			achieved *float64
			fit      **TraceFit
			queue    **QueueStats
		}{
			{p.Up, client, server, func() *stage { return tb.links[client].up }, &res.UpAchieved, &res.UpTrace, &res.UpQueue},
			{p.Down, server, client, func() *stage { return tb.links[client].down }, &res.DownAchieved, &res.DownTrace, &res.DownQueue},
		} {
			var before lateCounts
			var drops0, over0 uint64
			aqm := false
			if tb.emu != nil {
				before, drops0, over0, aqm = dir.stage().queueSnapshot()
			}
			switch {
			case dir.d.Trace != "" && tb.emu != nil:
				if *dir.fit, err = tb.traceThroughput(ctx, dir.from, dir.to, dir.stage(), dir.d.Delay, max(o.Throughput, 3*time.Second)); err != nil {
					return nil, err
				}
				*dir.achieved = (*dir.fit).Achieved
			case dir.d.Rate > 0:
				if *dir.achieved, err = tb.throughput(ctx, dir.from, dir.to, dir.d.Rate, o.Throughput); err != nil {
					return nil, err
				}
			}
			if aqm {
				after, drops1, over1, _ := dir.stage().queueSnapshot()
				d := after.since(before)
				*dir.queue = &QueueStats{Discipline: dir.d.Queue, SojournP50: d.quantile(0.5), SojournP99: d.quantile(0.99), Drops: drops1 - drops0, Overlimit: over1 - over0}
			}
		}
		if d := time.Since(t0); res.UpRate > 0 || res.DownRate > 0 {
			res.EmulatorCPU = float64(cpu()-cpu0) / float64(d)
		}
	}
	res.FIFO = tb.emu != nil && tb.emu.fifo.Load()
	return res, nil
}

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

// throughput sends paced full-size UDP datagrams from one host to another
// at 110 % of rate and returns the bit rate that arrived, from the
// kernel's timestamps of the datagrams' arrival at the host's device.
// The sink drains its socket every millisecond rather than being woken
// for each datagram: that wake-up would be paid inside the emulator's
// sendto, where the receiving host's network stack runs, and counted as
// the emulator's CPU. The sink is a plain socket, not udpIn's: Go's
// netpoller would have its epoll woken by each datagram all the same.
func (tb *Testbed) throughput(ctx context.Context, from, to string, rate float64, d time.Duration) (float64, error) {
	return tb.blast(ctx, from, to, 1.1*rate, d, nil)
}

// blast is throughput's work: it sends at offered bit/s for d and calls
// arrived, if set, with each datagram's arrival (kernel timestamp,
// CLOCK_REALTIME ns), from the sink's goroutine.
func (tb *Testbed) blast(ctx context.Context, from, to string, offered float64, d time.Duration, arrived func(at int64)) (float64, error) {
	var fd int
	err := tb.Run(to, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		sa := &unix.SockaddrInet4{}
		copy(sa.Addr[:], tb.IP(to).To4())
		return unix.Bind(fd, sa)
	})
	if err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		return 0, fmt.Errorf("UDP sink in %s: %w", to, err)
	}
	defer unix.Close(fd)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	local, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	var bytes int64
	var first, last int64 // kernel timestamps, CLOCK_REALTIME ns
	var stop atomic.Bool
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		rx := newReceiver(make([]byte, 2048))
		pause := unix.NsecToTimespec(int64(time.Millisecond))
		for {
			n, at, err := rx.recv(fd)
			if err == nil {
				if at == 0 {
					at = time.Now().UnixNano()
				}
				if first == 0 {
					first = at
				}
				last = at
				bytes += int64(n + 28)
				if arrived != nil {
					arrived(at)
				}
				continue
			}
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) || stop.Load() {
				return
			}
			unix.Nanosleep(&pause, nil)
		}
	}()
	to4 := local.(*unix.SockaddrInet4)
	src, err := tb.udpIn(from, "", &net.UDPAddr{IP: net.IP(to4.Addr[:]), Port: to4.Port})
	if err != nil {
		stop.Store(true)
		<-drained
		return 0, err
	}
	defer src.Close()
	src.SetWriteBuffer(8 << 20)
	const size = 1472 // a 1500-octet IP packet
	// UDP GSO: one write of up to 44 datagrams, cut by the kernel before
	// the host's device (whose offloads are off, so the emulator still
	// sees each packet): a sender of 80k datagrams a second must not take
	// the CPU the emulator needs. Without it, one write each.
	perWrite := 1
	if rc, err := src.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			if unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size) == nil {
				perWrite = 44
			}
		})
	}
	payload := make([]byte, size*perWrite)
	perSec := offered / float64((size+28)*8)
	start := time.Now()
	sentN := 0
	for time.Since(start) < d && ctx.Err() == nil {
		due := int(time.Since(start).Seconds() * perSec)
		for sentN < due {
			n := min(due-sentN, perWrite)
			src.Write(payload[:n*size])
			sentN += n
		}
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(300 * time.Millisecond) // let the queue drain
	stop.Store(true)
	<-drained
	if first == 0 || last <= first {
		return 0, fmt.Errorf("throughput %s -> %s: nothing arrived", from, to)
	}
	// Count from the first arrival: bytes after it over the time since.
	return float64((bytes-1500)*8) / (float64(last-first) / 1e9), nil
}

// TraceFit is how a trace-driven direction delivered, per 100 ms window
// while its queue stayed full: the octets that arrived against those the
// trace's opportunities carry in the window.
type TraceFit struct {
	Trace    string  `json:"trace"`
	Windows  int     `json:"windows"`  // compared
	ErrP50   float64 `json:"err_p50"`  // |arrived - trace| / trace, per window
	ErrMax   float64 `json:"err_max"`  //
	Total    float64 `json:"total"`    // arrived / trace over all windows
	Achieved float64 `json:"achieved"` // bit/s over the windows
	Offered  float64 `json:"offered"`  // bit/s sent
}

// FitWindow is the window TraceFit compares.
const FitWindow = 100 * time.Millisecond

// traceThroughput saturates a trace-driven stage with full-size UDP
// datagrams, 1.3 times the trace's busiest window, and compares what
// arrives per window (the datagrams' kernel timestamps at the receiving
// host) with what the trace delivers in the same window, shifted by the
// propagation delay. The first 300 ms (the queue filling) are left out.
func (tb *Testbed) traceThroughput(ctx context.Context, from, to string, st *stage, delay, d time.Duration) (*TraceFit, error) {
	st.mu.Lock()
	tc := st.trace
	st.mu.Unlock()
	if tc == nil {
		return nil, fmt.Errorf("no trace on the link %s -> %s", from, to)
	}
	tr, base := tc.tr, tc.base
	peak := 0.0
	for w := time.Duration(0); w < tr.Period(); w += FitWindow {
		peak = max(peak, float64(tr.Bytes(w, w+FitWindow))*8/FitWindow.Seconds())
	}
	offered := 1.3 * peak
	var arrivals []int64
	var mu sync.Mutex
	if _, err := tb.blast(ctx, from, to, offered, d, func(at int64) {
		mu.Lock()
		arrivals = append(arrivals, at)
		mu.Unlock()
	}); err != nil {
		return nil, err
	}
	mu.Lock() // the sink has stopped: this orders its writes before the reads below
	defer mu.Unlock()
	if len(arrivals) == 0 {
		return nil, fmt.Errorf("trace throughput %s -> %s: nothing arrived", from, to)
	}
	// Arrival times on the trace's clock: wall-clock ns since its base,
	// less the propagation delay.
	origin := base.UnixNano() + int64(delay)
	first := time.Duration(arrivals[0] - origin)
	last := time.Duration(arrivals[len(arrivals)-1] - origin)
	start := (first + 300*time.Millisecond).Truncate(FitWindow) + FitWindow
	// Octets arrived per window, counted in one pass.
	arrived := map[time.Duration]int64{}
	for _, a := range arrivals {
		arrived[time.Duration(a-origin).Truncate(FitWindow)] += 1500
	}
	var errs []float64
	var got, want int64
	fit := &TraceFit{Trace: tr.Name, Offered: offered}
	for w := start; w+FitWindow <= last; w += FitWindow {
		exp, n := tr.Bytes(w, w+FitWindow), arrived[w]
		got, want = got+n, want+exp
		if exp > 0 {
			errs = append(errs, math.Abs(float64(n-exp))/float64(exp))
		}
		fit.Windows++
	}
	if fit.Windows == 0 || want == 0 {
		return nil, fmt.Errorf("trace throughput %s -> %s: no whole window to compare", from, to)
	}
	slices.Sort(errs)
	if len(errs) > 0 {
		fit.ErrP50, fit.ErrMax = stats.Quantile(errs, 0.5), errs[len(errs)-1]
	}
	fit.Total = float64(got) / float64(want)
	fit.Achieved = float64(got*8) / (time.Duration(fit.Windows) * FitWindow).Seconds()
	return fit, nil
}

// drain waits, up to limit, until no emulated link holds packets: every
// stage's rate queue is empty and every writer's heap too.
func (tb *Testbed) drain(limit time.Duration) {
	if tb.emu == nil {
		return
	}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		busy := false
		now := time.Now()
		for _, l := range tb.emu.all {
			for _, st := range []*stage{l.up, l.down} {
				st.mu.Lock()
				busy = busy || st.rateEnd.After(now)
				st.mu.Unlock()
			}
			l.mu.Lock()
			busy = busy || len(l.queue) > 0 || l.writing
			l.mu.Unlock()
		}
		if !busy {
			return
		}
	}
}

// QueueStats is what a CoDel, FQ-CoDel or PIE queue did during a check's
// throughput run: the packets' time in it (bucket bounds, within 25 %)
// and its drops.
type QueueStats struct {
	Discipline             string        `json:"discipline"`
	SojournP50, SojournP99 time.Duration `json:",omitempty"`
	Drops                  uint64        `json:"drops"`     // the AQM's
	Overlimit              uint64        `json:"overlimit"` // over queue_packets
}

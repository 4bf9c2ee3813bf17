package testbed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doxlab/doxlab/internal/stats"

	"golang.org/x/sys/unix"
)

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

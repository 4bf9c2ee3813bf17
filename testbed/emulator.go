package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"
)

// The writer sleeps until shortly before a departure and spins the rest:
// clock_nanosleep wakes late, on a VM by tens of microseconds and by
// hundreds after a long idle. A packet with nothing queued behind it
// (handshakes, DNS, probes: sparse and timing-critical) gets a long spin;
// back-to-back packets, whose writer is awake anyway, a short one, so
// bulk transfers do not pay for precision they cannot use.
const (
	spinSparse = 200 * time.Microsecond
	spinDense  = 20 * time.Microsecond
)

// emulator forwards IP packets between the hosts' TUN devices. A packet
// from A to B passes A's up stage and B's down stage; B's writer thread
// sleeps until the computed departure and writes it into B's TUN device.
type emulator struct {
	links map[[4]byte]*link
	all   []*link
	done  chan struct{}
	wg    sync.WaitGroup

	baseTime time.Time // paired with baseMono to turn times into CLOCK_MONOTONIC
	baseMono int64

	fifo atomic.Bool // writer threads got SCHED_FIFO
}

type link struct {
	host     string
	ip       net.IP
	tun      *os.File
	fd       int
	up, down *stage
	out      chan packet

	capUp, capDown *capture // packets leaving and reaching the host

	rx, tx, noRoute, overflow atomic.Uint64
	readerTid, writerTid      atomic.Int64 // the emulator's threads, for CPU accounting
	lateNs                    atomic.Int64 // summed lateness of departures, for stats
}

type packet struct {
	data   []byte
	depart time.Time
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 65536); return &b }}

func newEmulator() *emulator {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	e := &emulator{links: map[[4]byte]*link{}, done: make(chan struct{}), baseTime: time.Now(), baseMono: ts.Nano()}
	return e
}

func (e *emulator) add(l *link) {
	var k [4]byte
	copy(k[:], l.ip.To4())
	e.links[k] = l
	e.all = append(e.all, l)
}

func (e *emulator) start() {
	// A writer asleep in clock_nanosleep keeps its P until sysmon takes it
	// back, which can be 10 ms when the process is idle; readers would wait
	// for a P that long. Spare Ps, one per writer and then some, avoid it.
	if want := runtime.NumCPU() + len(e.all) + 2; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	for _, l := range e.all {
		e.wg.Add(2)
		go e.read(l)
		go e.write(l)
	}
}

func (e *emulator) stop() {
	close(e.done)
	e.wg.Wait() // readers notice within one poll period
	for _, l := range e.all {
		l.tun.Close()
	}
	for _, l := range e.all {
		l.capUp.close()
		l.capDown.close()
	}
}

// read takes packets off a host's TUN device on a dedicated OS thread
// (SCHED_FIFO when allowed) that poll(2)s the fd itself: the kernel wakes
// it directly, without a trip through Go's netpoller and scheduler, so the
// arrival time is taken within microseconds of the packet entering the
// device. It schedules each packet through both stages and queues it for
// the destination's writer.
func (e *emulator) read(src *link) {
	defer e.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e.realtime()
	src.readerTid.Store(int64(unix.Gettid()))
	fds := []unix.PollFd{{Fd: int32(src.fd), Events: unix.POLLIN}}
	for {
		select {
		case <-e.done:
			return
		default:
		}
		bp := bufPool.Get().(*[]byte)
		n, err := unix.Read(src.fd, *bp)
		now := time.Now()
		if err != nil {
			bufPool.Put(bp)
			if err == unix.EAGAIN || err == unix.EINTR {
				unix.Poll(fds, 100) // wake at least every 100 ms to notice stop
				continue
			}
			return
		}
		data := (*bp)[:n]
		if n < 20 || data[0]>>4 != 4 {
			bufPool.Put(bp) // IPv6 and non-IP (router solicitations): not routed
			continue
		}
		src.rx.Add(1)
		src.capUp.write(now, data)
		var k [4]byte
		copy(k[:], data[16:20])
		dst, ok := e.links[k]
		if !ok {
			src.noRoute.Add(1)
			bufPool.Put(bp)
			continue
		}
		t1, ok := src.up.schedule(now, n)
		if ok {
			t1, ok = dst.down.schedule(t1, n)
		}
		if !ok {
			bufPool.Put(bp)
			continue
		}
		pkt := packet{data: append(make([]byte, 0, n), data...), depart: t1}
		bufPool.Put(bp)
		select {
		case dst.out <- pkt:
		default:
			dst.overflow.Add(1) // the writer is hopelessly behind
		}
	}
}

// realtime gives the calling (locked) thread 1 ns timer slack and
// SCHED_FIFO when the process may have it.
func (e *emulator) realtime() {
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50}
	if unix.SchedSetAttr(0, attr, 0) == nil {
		e.fifo.Store(true)
	}
}

// write delivers a host's packets at their departure times from a
// dedicated OS thread with 1 ns timer slack (and SCHED_FIFO when allowed),
// sleeping with absolute clock_nanosleep and spinning the last stretch.
func (e *emulator) write(dst *link) {
	defer e.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e.realtime()
	dst.writerTid.Store(int64(unix.Gettid()))
	for {
		select {
		case <-e.done:
			return
		case p := <-dst.out:
			spin := spinDense
			if len(dst.out) == 0 {
				spin = spinSparse
			}
			e.sleepUntil(p.depart, spin)
			now := time.Now()
			if late := now.Sub(p.depart); late > 0 {
				dst.lateNs.Add(int64(late))
			}
			if _, err := unix.Write(dst.fd, p.data); err != nil {
				if errors.Is(err, unix.EBADF) {
					return
				}
				dst.overflow.Add(1)
				continue
			}
			dst.tx.Add(1)
			dst.capDown.write(now, p.data)
		}
	}
}

func (e *emulator) sleepUntil(t time.Time, spin time.Duration) {
	if d := time.Until(t); d > spin {
		ts := unix.NsecToTimespec(e.baseMono + int64(t.Sub(e.baseTime)) - int64(spin))
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
		}
	}
	for time.Now().Before(t) {
	}
}

// capture writes a pcap with nanosecond timestamps and raw IP link type,
// readable by tshark and Wireshark.
type capture struct {
	mu sync.Mutex
	f  *os.File
	b  *bufio.Writer
	w  *pcapgo.Writer
}

func newCapture(dir, name string) (*capture, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	c := &capture{f: f, b: bufio.NewWriterSize(f, 1<<16)}
	c.w = pcapgo.NewWriterNanos(c.b)
	if err := c.w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

func (c *capture) write(t time.Time, data []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.w.WritePacket(gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(data), Length: len(data)}, data)
	c.mu.Unlock()
}

func (c *capture) flush() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.b.Flush()
	c.mu.Unlock()
}

func (c *capture) close() {
	if c == nil {
		return
	}
	c.flush()
	c.f.Close()
}

// cpu is the CPU time of the emulator's own threads (readers and
// writers), which do all its work; traffic generators in the same process
// are not counted.
func (e *emulator) cpu() time.Duration {
	var total time.Duration
	for _, l := range e.all {
		for _, tid := range []int64{l.readerTid.Load(), l.writerTid.Load()} {
			if tid > 0 {
				total += statCPU(fmt.Sprintf("/proc/self/task/%d/stat", tid))
			}
		}
	}
	return total
}

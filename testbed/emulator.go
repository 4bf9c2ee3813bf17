package testbed

import (
	"bufio"
	"container/heap"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"
)

// The writer sleeps until shortly before a departure and spins the rest.
// How late a sleep ends depends on the machine and on the sleep's length:
// on a VM whose idle vCPUs halt, ppoll wakes ~30 µs late after 100 µs
// and ~150 µs (p99 ~270 µs) after 5 ms; with idle polling, ~20 µs. So
// each writer learns it: the spin before a sleep covers the worst
// oversleep among the last ones of similar length. Packets in a burst
// (less than burstGap after the previous one, when the writer is awake
// anyway) get a short fixed spin instead, so bulk transfers do not pay
// for precision they cannot use. What makes a burst is time, not the
// queue: probes 5 ms apart on a 40 ms link queue behind each other but
// each still wakes a sleeping writer.
const (
	spinDense   = 5 * time.Microsecond
	spinInitial = 300 * time.Microsecond // until a writer has learnt
	spinMin     = 10 * time.Microsecond
	spinMax     = time.Millisecond
	burstGap    = time.Millisecond
)

// spinner learns how much earlier than a departure to stop sleeping.
type spinner struct {
	late [4][128]time.Duration // recent oversleeps, by sleep length
	next [4]int
}

func newSpinner() *spinner {
	s := &spinner{}
	for b := range s.late {
		for i := range s.late[b] {
			s.late[b][i] = spinInitial
		}
	}
	return s
}

func sleepBucket(d time.Duration) int {
	switch {
	case d < 250*time.Microsecond:
		return 0
	case d < time.Millisecond:
		return 1
	case d < 4*time.Millisecond:
		return 2
	}
	return 3
}

// spin is the margin for a departure d from now.
func (s *spinner) spin(d time.Duration) time.Duration {
	return min(slices.Max(s.late[sleepBucket(d)][:])*5/4+spinMin, spinMax)
}

// record notes that a sleep of length d ended late by late.
func (s *spinner) record(d, late time.Duration) {
	b := sleepBucket(d)
	s.late[b][s.next[b]] = max(late, 0)
	s.next[b] = (s.next[b] + 1) % len(s.late[b])
}

// emulator forwards IP packets between the hosts. A packet from A to B
// passes A's up stage and B's down stage. One reader thread takes the
// packets every host sends off their taps; B's writer thread sleeps until
// each packet's departure and sends it out of B's port. Where both stages
// are transparent (profile none), the kernel forwards instead (a tc
// redirect between the ports, see Testbed.kernelPaths), and the reader
// sees those packets only to capture them.
type emulator struct {
	links map[[4]byte]*link
	all   []*link
	done  chan struct{}
	wg    sync.WaitGroup

	readerTid atomic.Int64 // the reader thread, for CPU accounting
	fifo      atomic.Bool  // the threads got SCHED_FIFO
	batch     atomic.Int64 // how long the reader may leave packets waiting (ns; see pace)
	writers   int          // per host: 1, or 2 racing (see newEmulator)
	cpus      []int        // the CPUs the process may run on, for the writers
}

// pace lets the reader take packets in batches while traffic flows when
// every path it emulates has a delay long enough to hide the wait: it
// then sleeps batch between reads instead of being woken by each packet.
// A wake-up is most of the emulator's cost per packet on a VM, and the
// sender pays for it too. Packets keep their kernel timestamps, so
// reading them up to batch late moves no departure. Paths without delay
// need every packet read at once.
func (e *emulator) pace() {
	least := time.Duration(-1)
	for _, a := range e.all {
		for _, b := range e.all {
			if a != b && !a.kernel[b.index].Load() {
				if d := a.up.delay() + b.down.delay(); least < 0 || d < least {
					least = d
				}
			}
		}
	}
	var batch time.Duration
	if least >= 4*maxBatch {
		batch = maxBatch
	}
	e.batch.Store(int64(batch))
}

const maxBatch = time.Millisecond

type link struct {
	host     string
	index    int // in emulator.all
	ip       net.IP
	tap      int // packet socket on the host's interface: the packets it sends, with timestamps
	port     int // packet socket on the host's port: sends packets to the host
	to       unix.RawSockaddrLinklayer
	up, down *stage
	// kernel[i] is set while the kernel forwards this host's packets to
	// host i itself.
	kernel []atomic.Bool

	// Packets on their way to the host, by departure. The reader pushes
	// and signals wakes (an eventfd per writer) when the earliest
	// departure changes; a writer sleeps on its own until the earliest is
	// due.
	mu       sync.Mutex
	queue    departures
	writing  bool      // a writer holds a packet it has not yet sent
	spinning uint64    // the packet (seq) a writer spins for
	last     time.Time // the previous departure, by either writer
	seq      uint64    // packets queued so far
	wakes    []int

	capUp, capDown *capture // packets leaving and reaching the host

	rx, tx, noRoute, overflow atomic.Uint64   // rx, tx: packets the emulator read from and sent to the host
	writerTids                [2]atomic.Int64 // for CPU accounting
	lateNs                    atomic.Int64    // summed lateness of departures, for stats
	late                      lateness        // and their distribution
}

type packet struct {
	data   []byte
	depart time.Time
	seq    uint64 // arrival order, to keep equal departures in order
}

// departures is a min-heap of packets by departure: hosts with different
// access links send into one host, so arrival order is not departure order.
type departures []packet

func (d departures) Len() int { return len(d) }
func (d departures) Less(i, j int) bool {
	if d[i].depart.Equal(d[j].depart) {
		return d[i].seq < d[j].seq
	}
	return d[i].depart.Before(d[j].depart)
}
func (d departures) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)   { *d = append(*d, x.(packet)) }
func (d *departures) Pop() any {
	old := *d
	p := old[len(old)-1]
	*d = old[:len(old)-1]
	return p
}

// maxQueued bounds a host's in-flight packets (about 1 GB/s for 50 ms).
const maxQueued = 1 << 16

// newEmulator makes an emulator with two writers per host that race for
// each departure from different CPUs, where there are two: on a kernel
// without preemption a woken thread waits until whatever runs in the
// kernel on its CPU yields, and on a VM a halted vCPU takes its time to
// wake, so the packet goes out from whichever CPU is free first. Under a
// browser's load on this 2-vCPU VM, racing cut the RTT error's p99 from
// 426-845 µs to 89-155 µs. The second writer races only for packets that
// start a burst (see write), so bulk transfers cost no more.
func newEmulator() *emulator {
	e := &emulator{links: map[[4]byte]*link{}, done: make(chan struct{}), writers: 1}
	// Pinned only to CPUs the process may use (taskset, a cpuset), so
	// that the two writers of a host stay apart.
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) == nil {
		for cpu := range 8 * int(unsafe.Sizeof(allowed)) {
			if allowed.IsSet(cpu) {
				e.cpus = append(e.cpus, cpu)
			}
		}
	}
	if len(e.cpus) >= 2 {
		e.writers = 2
	}
	return e
}

func (e *emulator) add(l *link) error {
	for range e.writers {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return fmt.Errorf("eventfd: %w", err)
		}
		l.wakes = append(l.wakes, fd)
	}
	var k [4]byte
	copy(k[:], l.ip.To4())
	e.links[k] = l
	l.index = len(e.all)
	e.all = append(e.all, l)
	for _, l := range e.all {
		l.kernel = make([]atomic.Bool, len(e.all))
	}
	return nil
}

func (e *emulator) start() {
	// The emulator's threads block in system calls; spare Ps let the rest
	// of the process run meanwhile without waiting for sysmon to hand
	// theirs off.
	if want := runtime.NumCPU() + len(e.all) + 2; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	e.wg.Add(1 + e.writers*len(e.all))
	go e.read()
	for _, l := range e.all {
		for w := range e.writers {
			go e.write(l, w)
		}
	}
}

func (e *emulator) stop() {
	close(e.done)
	for _, l := range e.all {
		l.signal()
	}
	e.wg.Wait() // the reader notices within one poll period
	for _, l := range e.all {
		unix.Close(l.tap)
		unix.Close(l.port)
		for _, fd := range l.wakes {
			unix.Close(fd)
		}
	}
	for _, l := range e.all {
		l.capUp.close()
		l.capDown.close()
	}
}

func (e *emulator) stopped() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// Writers run above the reader: a reader that waits delays nothing, since
// packets are timed from the kernel's timestamps, but a writer that waits
// delivers late.
const (
	readerPriority = 50
	writerPriority = 60
)

// realtime gives the calling (locked) thread 1 ns timer slack and
// SCHED_FIFO at prio when the process may have it.
func (e *emulator) realtime(prio uint32) {
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: prio}
	if unix.SchedSetAttr(0, attr, 0) == nil {
		e.fifo.Store(true)
	}
}

// read takes the packets every host sends off its tap, on one dedicated
// OS thread (SCHED_FIFO when allowed) that poll(2)s the sockets itself:
// the kernel wakes it directly, without a trip through Go's netpoller and
// scheduler. Each packet's clock starts at the kernel's timestamp of its
// hand-over to the host's device, not at the read, so waking up (tens of
// µs on a VM whose idle vCPUs halt) delays nothing. A packet already due is
// sent at once; the rest are queued for their writers. One thread for all
// hosts also means that a reply the kernel makes while the reader sends a
// request is read without another wake-up.
func (e *emulator) read() {
	defer e.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread, real-time and maybe pinned, ends with the goroutine
	e.realtime(readerPriority)
	e.readerTid.Store(int64(unix.Gettid()))
	fds := make([]unix.PollFd, len(e.all))
	for i, l := range e.all {
		fds[i] = unix.PollFd{Fd: int32(l.tap), Events: unix.POLLIN}
	}
	rx := newBatchReceiver(32)
	// ready marks the taps to read: those poll found readable, one left
	// at the fairness limit, and one whose host the reader just sent a
	// packet to without delay, since the kernel answers some (ICMP echo,
	// TCP RST) before sendto returns.
	ready := make([]bool, len(e.all))
	flowing := false // the last round read packets
	for !e.stopped() {
		// CoDel and FQ-CoDel stages decide when their link takes the
		// next packet: run them, and wake for their next moment.
		aqmNext := e.runAQM(time.Now())
		if !slices.Contains(ready, true) {
			timeout := 100 * time.Millisecond // wake at least this often to notice stop
			if !aqmNext.IsZero() {
				timeout = max(0, min(timeout, time.Until(aqmNext)))
			}
			if batch := time.Duration(e.batch.Load()); batch > 0 && flowing {
				ts := unix.NsecToTimespec(int64(batch))
				unix.Nanosleep(&ts, nil)
				timeout = 0
			}
			ts := unix.NsecToTimespec(int64(timeout))
			unix.Ppoll(fds, &ts, nil)
			for i := range fds {
				ready[i] = fds[i].Revents != 0
			}
			flowing = false
			continue
		}
		for i, src := range e.all {
			if !ready[i] {
				continue
			}
			ready[i] = false
			n := 0
			for n < 64 { // then the next host, for fairness
				// An error is EAGAIN (all read) or one the socket reports
				// once, such as ENETDOWN when it was bound before the
				// device came up.
				k, err := rx.recv(src.tap)
				if err != nil || k == 0 {
					break
				}
				now := time.Now()
				for j := range k {
					data, at := rx.packet(j)
					if dst := e.forward(src, data, sent(now, at)); dst != nil {
						ready[dst.index] = true
					}
				}
				n += k
				if k < len(rx.hdrs) {
					break // the socket is empty
				}
			}
			if n >= 64 {
				ready[i] = true // more may be waiting
			}
			flowing = flowing || n > 0
		}
	}
}

// forward schedules one packet from src through both stages. It returns
// the destination when it wrote the packet there at once.
func (e *emulator) forward(src *link, data []byte, at time.Time) *link {
	if len(data) < 20 || data[0]>>4 != 4 {
		return nil // not IPv4: not routed
	}
	src.rx.Add(1)
	src.capUp.write(at, data)
	var k [4]byte
	copy(k[:], data[16:20])
	dst, ok := e.links[k]
	if !ok {
		src.noRoute.Add(1)
		return nil
	}
	if src.kernel[dst.index].Load() { // forwarded already: capture only
		dst.capDown.write(at, data)
		return nil
	}
	if src.up.aqmOn.Load() || dst.down.aqmOn.Load() {
		e.throughAQM(src, dst, slices.Clone(data), at)
		return nil
	}
	t, ok := src.up.schedule(at, len(data))
	if ok {
		t, ok = dst.down.schedule(t, len(data))
	}
	if !ok {
		return nil
	}
	dst.mu.Lock()
	if len(dst.queue) == 0 && !dst.writing && !t.After(time.Now()) {
		dst.mu.Unlock()
		dst.deliver(data, t)
		return dst
	}
	dst.mu.Unlock()
	dst.enqueue(slices.Clone(data), t)
	return nil
}

// enqueue queues a packet (its own copy) for the host's writers, to
// leave at t.
func (dst *link) enqueue(data []byte, t time.Time) {
	dst.mu.Lock()
	if len(dst.queue) >= maxQueued {
		dst.mu.Unlock()
		dst.overflow.Add(1) // the writer is hopelessly behind
		return
	}
	dst.seq++
	heap.Push(&dst.queue, packet{data: data, depart: t, seq: dst.seq})
	first := dst.queue[0].seq == dst.seq
	dst.mu.Unlock()
	if first {
		dst.signal()
	}
}

// throughAQM sends a packet through both stages when one of them holds
// its packets (CoDel, FQ-CoDel): such a stage passes it on only once its
// link has sent it, when runAQM gets there.
func (e *emulator) throughAQM(src, dst *link, data []byte, at time.Time) {
	down := func(t time.Time) {
		if dst.down.aqmOn.Load() {
			dst.down.admit(t, data, func(out time.Time) { dst.enqueue(data, out) })
			return
		}
		if out, ok := dst.down.schedule(t, len(data)); ok {
			dst.enqueue(data, out)
		}
	}
	if src.up.aqmOn.Load() {
		src.up.admit(at, data, down)
		return
	}
	if t, ok := src.up.schedule(at, len(data)); ok {
		down(t)
	}
}

// runAQM runs every AQM stage up to now, the hosts' up stages first
// (what they send may reach a down stage by now), and returns the
// earliest time one has work next (zero: none).
func (e *emulator) runAQM(now time.Time) time.Time {
	var next time.Time
	for _, up := range []bool{true, false} {
		for _, l := range e.all {
			st := l.down
			if up {
				st = l.up
			}
			if !st.aqmOn.Load() {
				continue
			}
			if t := st.run(now); !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// write delivers a host's packets at their departure times from a
// dedicated OS thread with 1 ns timer slack (and SCHED_FIFO when allowed):
// it sleeps in ppoll on its eventfd, so an earlier packet can wake it,
// and spins the last stretch. Writer w of two racing ones stays on a CPU
// of its own; whichever finds a packet due first sends it, and the other
// finds it gone. Only the first writer times packets inside a burst.
func (e *emulator) write(dst *link, w int) {
	defer e.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread, real-time and maybe pinned, ends with the goroutine
	e.realtime(writerPriority)
	if e.writers > 1 {
		var set unix.CPUSet
		set.Set(e.cpus[(dst.index+w)%len(e.cpus)])
		unix.SchedSetaffinity(0, &set)
	}
	dst.writerTids[w].Store(int64(unix.Gettid()))
	wake := dst.wakes[w]
	learn := newSpinner()
	bs := newBatchSender(64)
	for !e.stopped() {
		dst.mu.Lock()
		if len(dst.queue) == 0 {
			dst.mu.Unlock()
			wait(wake, 100*time.Millisecond)
			continue
		}
		due, seq, prev := dst.queue[0].depart, dst.queue[0].seq, dst.last
		dst.mu.Unlock()
		ahead := time.Until(due)
		spin := spinDense
		if due.Sub(prev) >= burstGap {
			spin = learn.spin(ahead)
		} else if w > 0 && ahead > 0 {
			// In a burst the first writer is awake anyway; a second
			// racing for every packet would double the wake-ups where
			// precision matters least. It looks again within burstGap and
			// sends what is overdue, so it still takes over if the first
			// is held up.
			wait(wake, burstGap)
			continue
		}
		if d := ahead - spin; d > 0 {
			if wait(wake, d) {
				continue // signalled: the earliest packet may have changed
			}
			learn.record(ahead, spin-time.Until(due))
		}
		// The first writer awake spins; the other sleeps until the
		// departure and sends the packet only if it is still there, so a
		// raced packet costs one spin, not two.
		dst.mu.Lock()
		if dst.spinning == seq && len(dst.queue) > 0 && dst.queue[0].seq == seq {
			dst.mu.Unlock()
			if d := time.Until(due); d > 0 {
				wait(wake, d)
				continue
			}
		} else {
			dst.spinning = seq
			dst.mu.Unlock()
		}
		for time.Now().Before(due) {
		}
		dst.mu.Lock()
		if dst.writing {
			// The other writer is sending. Sleep until it signals or a
			// moment passes, never spin on the lock: two real-time
			// writers busy at once would starve the reader, the traffic's
			// own senders and receivers, and each other (the rate
			// collapse of issue 21).
			dst.mu.Unlock()
			wait(wake, writerBackoff)
			continue
		}
		now := time.Now()
		if len(dst.queue) == 0 || dst.queue[0].depart.After(now) {
			dst.mu.Unlock() // the other writer has sent it
			continue
		}
		// Everything already due goes in one sendmmsg: a writer that
		// fell behind catches up at once instead of packet by packet.
		batch := bs.pkts[:0]
		for len(dst.queue) > 0 && !dst.queue[0].depart.After(now) && len(batch) < cap(bs.pkts) {
			batch = append(batch, heap.Pop(&dst.queue).(packet))
		}
		dst.writing = true
		dst.mu.Unlock()
		sentAt := bs.deliver(dst, batch)
		dst.mu.Lock()
		dst.writing = false
		dst.last = sentAt
		dst.mu.Unlock()
		if len(batch) > 1 {
			dst.signal() // the other writer may have backed off for this batch
		}
	}
}

// writerBackoff is how long a writer sleeps while the other sends.
const writerBackoff = 20 * time.Microsecond

// batchSender sends packets with one sendmmsg(2), through arrays it
// reuses: a writer calls it for every packet.
type batchSender struct {
	pkts []packet
	iov  []unix.Iovec
	hdrs []unix.Mmsghdr
}

func newBatchSender(n int) *batchSender {
	return &batchSender{pkts: make([]packet, 0, n), iov: make([]unix.Iovec, n), hdrs: make([]unix.Mmsghdr, n)}
}

// deliver sends the packets to the host in order and accounts for each,
// as link.deliver does for one; it returns when the first was sent.
func (b *batchSender) deliver(l *link, pkts []packet) time.Time {
	if len(pkts) == 1 {
		return l.deliver(pkts[0].data, pkts[0].depart)
	}
	now := time.Now()
	for i, p := range pkts {
		b.iov[i].Base = &p.data[0]
		b.iov[i].SetLen(len(p.data))
		b.hdrs[i] = unix.Mmsghdr{Hdr: unix.Msghdr{Name: (*byte)(unsafe.Pointer(&l.to)), Namelen: unix.SizeofSockaddrLinklayer, Iov: &b.iov[i], Iovlen: 1}}
	}
	for done := 0; done < len(pkts); {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(l.port), uintptr(unsafe.Pointer(&b.hdrs[done])), uintptr(len(pkts)-done), 0, 0, 0)
		if errno != 0 || n == 0 {
			l.overflow.Add(1) // the first of the rest could not be sent: skip it
			done++
			continue
		}
		for _, p := range pkts[done : done+int(n)] {
			late := now.Sub(p.depart)
			l.late.add(late)
			if late > 0 {
				l.lateNs.Add(int64(late))
			}
			l.tx.Add(1)
			l.capDown.write(now, p.data)
		}
		done += int(n)
	}
	return now
}

// deliver sends a packet to the host and accounts for it.
func (l *link) deliver(data []byte, depart time.Time) time.Time {
	now := time.Now()
	late := now.Sub(depart)
	l.late.add(late)
	if late > 0 {
		l.lateNs.Add(int64(late))
	}
	_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(l.port), uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), 0,
		uintptr(unsafe.Pointer(&l.to)), unix.SizeofSockaddrLinklayer)
	if errno != 0 {
		l.overflow.Add(1)
		return now
	}
	l.tx.Add(1)
	l.capDown.write(now, data)
	return now
}

// wait blocks until fd (an eventfd) is signalled or d has passed, and
// resets it; it reports whether it was signalled. ppoll's timeout is an
// hrtimer, as exact as clock_nanosleep with the thread's 1 ns slack.
func wait(fd int, d time.Duration) bool {
	ts := unix.NsecToTimespec(int64(d))
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, _ := unix.Ppoll(fds, &ts, nil); n > 0 {
		var b [8]byte
		unix.Read(fd, b[:])
		return true
	}
	return false
}

// signal wakes the host's writers.
func (l *link) signal() {
	for _, fd := range l.wakes {
		signal(fd)
	}
}

// signal wakes the thread waiting on eventfd fd.
func signal(fd int) {
	one := [8]byte{1}
	unix.Write(fd, one[:])
}

// receiver reads packets with their SO_TIMESTAMPNS timestamps through
// one reused msghdr: recvmsg without allocating, as the reader does it
// for every packet.
type receiver struct {
	iov unix.Iovec
	oob [64]byte
	msg unix.Msghdr
}

func newReceiver(buf []byte) *receiver {
	r := &receiver{}
	r.iov.Base = &buf[0]
	r.iov.SetLen(len(buf))
	r.msg.Iov = &r.iov
	r.msg.Iovlen = 1
	r.msg.Control = &r.oob[0]
	return r
}

// batchReceiver reads up to n packets per recvmmsg(2), each with its
// timestamp, through arrays it reuses.
type batchReceiver struct {
	bufs [][]byte
	oobs [][64]byte
	iov  []unix.Iovec
	hdrs []unix.Mmsghdr
}

func newBatchReceiver(n int) *batchReceiver {
	r := &batchReceiver{bufs: make([][]byte, n), oobs: make([][64]byte, n), iov: make([]unix.Iovec, n), hdrs: make([]unix.Mmsghdr, n)}
	for i := range n {
		r.bufs[i] = make([]byte, 65536)
		r.iov[i].Base = &r.bufs[i][0]
		r.iov[i].SetLen(len(r.bufs[i]))
		r.hdrs[i].Hdr.Iov = &r.iov[i]
		r.hdrs[i].Hdr.Iovlen = 1
		r.hdrs[i].Hdr.Control = &r.oobs[i][0]
	}
	return r
}

// recv reads the packets waiting on fd, without blocking, and returns how
// many it read.
func (r *batchReceiver) recv(fd int) (int, error) {
	for i := range r.hdrs {
		r.hdrs[i].Hdr.SetControllen(len(r.oobs[i]))
		r.hdrs[i].Hdr.Flags = 0
		r.hdrs[i].Len = 0
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// packet is the i-th packet the last recv read and its kernel timestamp
// (CLOCK_REALTIME ns, 0 if none).
func (r *batchReceiver) packet(i int) ([]byte, int64) {
	h := &r.hdrs[i]
	return r.bufs[i][:h.Len], kernelTime(r.oobs[i][:h.Hdr.Controllen])
}

// recv reads one packet from fd without blocking and returns its length
// and its kernel timestamp in CLOCK_REALTIME ns (0 if none).
func (r *receiver) recv(fd int) (int, int64, error) {
	r.msg.SetControllen(len(r.oob))
	r.msg.Flags = 0
	n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.msg)), unix.MSG_DONTWAIT)
	if errno != 0 {
		return 0, 0, errno
	}
	return int(n), kernelTime(r.oob[:r.msg.Controllen]), nil
}

// kernelTime finds the kernel's software timestamp in control messages
// (SCM_TIMESTAMPNS, or SCM_TIMESTAMPING's first), in CLOCK_REALTIME ns, 0
// if there is none. It allocates nothing: the reader calls it for every
// packet.
func kernelTime(oob []byte) int64 {
	for _, typ := range [2]int32{unix.SCM_TIMESTAMPNS, unix.SCM_TIMESTAMPING} {
		if data := cmsgData(oob, unix.SOL_SOCKET, typ); len(data) >= 16 {
			return (*unix.Timespec)(unsafe.Pointer(&data[0])).Nano()
		}
	}
	return 0
}

// cmsgData returns the data of the first control message of that level
// and type in oob, or nil; it walks the headers itself, without allocating.
func cmsgData(oob []byte, level, typ int32) []byte {
	for len(oob) >= unix.CmsgLen(0) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if int(h.Len) < unix.CmsgLen(0) || int(h.Len) > len(oob) {
			return nil
		}
		data := oob[unix.CmsgLen(0):h.Len]
		if h.Level == level && h.Type == typ {
			return data
		}
		oob = oob[min(unix.CmsgSpace(len(data)), len(oob)):]
	}
	return nil
}

// sent turns a packet's kernel timestamp (CLOCK_REALTIME ns, 0 if none)
// into a time on now's monotonic clock: only the packet's age comes from
// the wall clock, bounded so that a clock step cannot move it far. A
// stamp a second or more away is not a wall-clock time at all (TCP marks
// its packets with a CLOCK_MONOTONIC departure time, which the kernel
// could pass on) and counts as none.
func sent(now time.Time, kernelNs int64) time.Time {
	age := time.Duration(now.UnixNano() - kernelNs)
	if kernelNs == 0 || age >= time.Second || age <= -time.Second {
		return now
	}
	return now.Add(-min(max(age, 0), 50*time.Millisecond))
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
	tids := []int64{e.readerTid.Load()}
	for _, l := range e.all {
		for i := range l.writerTids {
			tids = append(tids, l.writerTids[i].Load())
		}
	}
	var total time.Duration
	for _, tid := range tids {
		if tid > 0 {
			total += statCPU(fmt.Sprintf("/proc/self/task/%d/stat", tid))
		}
	}
	return total
}

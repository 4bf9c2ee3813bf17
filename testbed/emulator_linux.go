package testbed

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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

func (d *departures) Push(x any) { *d = append(*d, x.(packet)) }

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

// stop stops the links and closes their captures, saying which capture
// a write to failed.
func (e *emulator) stop() error {
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
	var errs []error
	for _, l := range e.all {
		errs = append(errs, l.capUp.close(), l.capDown.close())
	}
	return errors.Join(errs...)
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

// writerBackoff is how long a writer sleeps while the other sends.
const writerBackoff = 20 * time.Microsecond

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

package testbed

import (
	"container/heap"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

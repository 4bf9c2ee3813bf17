package testbed

import (
	"container/heap"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

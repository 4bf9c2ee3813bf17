// Package wirets takes the kernel's software timestamps of a socket's
// packets (SO_TIMESTAMPING): when a datagram or segment was received,
// stamped as the kernel took it off the device, and when a sent one was
// handed to the device, read from the socket's error queue. They time an
// exchange as it crossed the wire, without the delay between the kernel
// and the Go code that reads the socket.
package wirets

import (
	"encoding/binary"
	"errors"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reporting and recording flags: software timestamps, received packets
// always, sent packets when a send asks for it (TXRequest), the error
// queue carrying the timestamp alone.
const flags = unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_TSONLY

// Enable turns receive timestamps on for the socket, and lets sends ask
// for transmit ones.
func Enable(c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags)
	})
	if err == nil {
		err = serr
	}
	return err
}

// OOBSize is room for the control messages a received packet carries.
const OOBSize = 128

// RX is the receive timestamp among a received packet's control
// messages; false if there is none.
func RX(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPING && len(m.Data) >= 16 {
			// struct scm_timestamping: ts[0] is the software timestamp.
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			if sec != 0 || nsec != 0 {
				return time.Unix(sec, nsec), true
			}
		}
	}
	return time.Time{}, false
}

// TXRequest is the control message that asks for this send's transmit
// timestamp.
func TXRequest() []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SO_TIMESTAMPING
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], unix.SOF_TIMESTAMPING_TX_SOFTWARE)
	return b
}

// Drain discards the transmit timestamps queued on the socket's error
// queue. A send that asks for its own drains first: a timestamp that
// came after an earlier send stopped waiting for it (a packet held in a
// qdisc, a busy machine) would otherwise be read as this send's, and
// time it from the earlier one.
func Drain(c syscall.RawConn) { readErrQueue(c) }

// errNone is an error queue with no timestamp in it yet.
var errNone = errors.New("no transmit timestamp queued")

// TX reads the latest transmit timestamp from the socket's error queue,
// waiting up to wait for the kernel to queue it (it does so as the packet
// reaches the device, within the send call on loopback and veth).
func TX(c syscall.RawConn, wait time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(wait)
	for {
		t, err := readErrQueue(c)
		if err == nil {
			return t, true
		}
		if !errors.Is(err, errNone) || time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func readErrQueue(c syscall.RawConn) (time.Time, error) {
	var (
		got  time.Time
		rerr error = errNone
	)
	buf, oob := make([]byte, 64), make([]byte, OOBSize)
	err := c.Control(func(fd uintptr) {
		for { // drain: keep the latest
			_, oobn, _, _, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
			if err != nil {
				if !errors.Is(err, unix.EAGAIN) {
					rerr = err
				}
				return
			}
			if t, ok := RX(oob[:oobn]); ok {
				got, rerr = t, nil
			}
		}
	})
	if err != nil {
		return time.Time{}, err
	}
	return got, rerr
}

//go:build unix

package transport

import (
	"errors"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/doxlab/doxlab/internal/wirets"
)

// recvmsg reads into b with the packet's receive timestamp. A socket has
// one reader at a time (the mux's, quic-go's), so oob is reused.
func (w *wireClock) recvmsg(b []byte) (int, time.Time, error) {
	var n int
	var rx time.Time
	var rerr error
	if w.oob == nil {
		w.oob = make([]byte, wirets.OOBSize)
	}
	oob := w.oob
	err := w.rc.Read(func(fd uintptr) bool {
		var oobn int
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b, oob, 0)
		if errors.Is(rerr, unix.EAGAIN) {
			return false
		}
		if rerr == nil {
			rx, _ = wirets.RX(oob[:oobn])
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, rx, err
	}
	if n == 0 && len(b) > 0 {
		return 0, rx, io.EOF
	}
	return n, rx, nil
}

// sendmsg writes b asking for its transmit timestamp, with none of an
// earlier send's left on the error queue to be read for it.
func (w *wireClock) sendmsg(b []byte) (int, error) {
	wirets.Drain(w.rc)
	var n int
	var serr error
	err := w.rc.Write(func(fd uintptr) bool {
		n, serr = unix.SendmsgN(int(fd), b, wirets.TXRequest(), nil, 0)
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err == nil {
		err = serr
	}
	return n, err
}

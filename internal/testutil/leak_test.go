package testutil

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB whose Fatalf records the failure and ends
// the goroutine, as a failing test's would: the leak checks are tested
// by whether they fail.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, a ...any) {
	r.failed = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

// noGrowth runs NoGrowth on a recorder and returns its failure, "" when
// it passed.
func noGrowth(t *testing.T, rounds int, round func()) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NoGrowth(r, rounds, round)
	}()
	<-done
	return r.failed
}

// leakedByARound blocks until its channel closes: what a round that
// forgot to stop its goroutine leaves behind.
func leakedByARound(stop <-chan struct{}) { <-stop }

// TestNoGrowthFindsALeak: every leak test in the tree rests on NoGrowth
// failing when a round leaves a goroutine running, and on its passing
// when a round's goroutines end, even some time after the round.
func TestNoGrowthFindsALeak(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	failed := noGrowth(t, 3, func() { go leakedByARound(stop) })
	require.Contains(t, failed, "after 3 more rounds")
	require.Contains(t, failed, "testutil.leakedByARound", "the failure shows the leaked goroutine's stack")

	var wg sync.WaitGroup
	require.Empty(t, noGrowth(t, 5, func() {
		wg.Add(1)
		go func() { defer wg.Done() }()
		wg.Wait()
	}), "a round that waits for its goroutine leaves nothing")

	require.Empty(t, noGrowth(t, 3, func() {
		go time.Sleep(300 * time.Millisecond)
	}), "goroutines that end after the rounds, within the wait, are no leak")
}

// TestOpenFilesCounts: the file-leak tests compare OpenFiles before and
// after; it must see each file opened and closed.
func TestOpenFilesCounts(t *testing.T) {
	before := OpenFiles(t)
	var files []*os.File
	for range 3 {
		f, err := os.Open(os.DevNull)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.Equal(t, before+3, OpenFiles(t))
	for _, f := range files {
		f.Close()
	}
	require.Equal(t, before, OpenFiles(t))
}

// TestDelayUDPKeepsTheOrder: a burst of replies comes back through the
// relay in the order the server sent them, as over a link; a relay that
// let them swap lost QUIC session tickets sent just ahead of a response.
func TestDelayUDPKeepsTheOrder(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer srv.Close()
	const burst = 100
	go func() {
		buf := make([]byte, 1500)
		_, from, err := srv.ReadFromUDP(buf)
		if err != nil {
			return
		}
		for i := range burst {
			srv.WriteToUDP(binary.BigEndian.AppendUint32(nil, uint32(i)), from)
		}
	}()
	conn, err := net.Dial("udp", DelayUDP(t, srv.LocalAddr().String(), 5*time.Millisecond))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("go"))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(Scaled(5*time.Second))))
	buf := make([]byte, 1500)
	next := 0
	for next < burst {
		n, err := conn.Read(buf)
		if err != nil {
			break // a loopback socket may drop some of a burst; what came must be in order
		}
		i := int(binary.BigEndian.Uint32(buf[:n]))
		require.GreaterOrEqual(t, i, next, "reply %d after %d", i, next-1)
		next = i + 1
	}
	require.Positive(t, next)
}

// TestDelayUDPHoldsEachReply: the 0-RTT tests rest on a handshake through
// DelayUDP taking at least its delay; each client's replies come back
// to it, held that long, and a client's later datagrams reuse its
// upstream socket (so the server sees one client, as a QUIC connection
// needs).
func TestDelayUDPHoldsEachReply(t *testing.T) {
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer echo.Close()
	var mu sync.Mutex
	sources := map[string]int{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			sources[from.String()]++
			mu.Unlock()
			echo.WriteToUDP(buf[:n], from)
		}
	}()
	const d = 150 * time.Millisecond
	relay := DelayUDP(t, echo.LocalAddr().String(), d)
	for c := range 2 {
		conn, err := net.Dial("udp", relay)
		require.NoError(t, err)
		defer conn.Close()
		for i := range 3 {
			msg := fmt.Sprintf("client %d message %d", c, i)
			sent := time.Now()
			_, err := conn.Write([]byte(msg))
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(Scaled(5*time.Second))))
			buf := make([]byte, 1500)
			n, err := conn.Read(buf)
			require.NoError(t, err)
			require.Equal(t, msg, string(buf[:n]), "each client gets its own replies")
			require.GreaterOrEqual(t, time.Since(sent), d, "a reply is held for the delay")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sources, 2, "one upstream socket per client: %v", sources)
	for src, n := range sources {
		require.Equal(t, 3, n, src)
	}
}

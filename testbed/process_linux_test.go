package testbed

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSeparateProcess runs a testbed's emulator in a child process: the
// hosts work from this process as before, profiles switch and checks
// run over the control socket, this process's garbage collection no
// longer reaches the links, and Close leaves nothing behind.
func TestSeparateProcess(t *testing.T) {
	tb := startTB(t, Spec{Name: "tsep", Separate: true})
	require.NotEqual(t, os.Getpid(), tb.PID, "the emulator runs in a process of its own")
	_, err := os.Stat("/proc/" + strconv.Itoa(tb.PID))
	require.NoError(t, err, "the child is alive")

	// A socket of this process in the server host, reached from the client.
	var sink *net.UDPConn
	require.NoError(t, tb.Run("server", func() (err error) {
		sink, err = net.ListenUDP("udp4", &net.UDPAddr{IP: tb.IP("server")})
		return err
	}))
	defer sink.Close()
	var src *net.UDPConn
	require.NoError(t, tb.Run("client", func() (err error) {
		src, err = net.DialUDP("udp4", nil, sink.LocalAddr().(*net.UDPAddr))
		return err
	}))
	defer src.Close()
	p := Profile{Name: "t20", Up: Direction{Delay: 10 * time.Millisecond}, Down: Direction{Delay: 10 * time.Millisecond}}
	require.NoError(t, tb.SetProfile("client", p))
	require.Equal(t, "t20", tb.Profiles["client"].Name)
	t0 := time.Now()
	_, err = src.Write([]byte("x"))
	require.NoError(t, err)
	sink.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = sink.ReadFromUDP(make([]byte, 10))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(t0), 10*time.Millisecond, "the up leg's delay, applied by the child")

	// Collections here stop nothing there.
	stop := collectEvery(5 * time.Millisecond)
	res, err := tb.Check(context.Background(), Profiles["fiber"], CheckOptions{Probes: 50, SkipThroughput: true})
	stop()
	require.NoError(t, err)
	require.Equal(t, "fiber", res.Profile)
	require.Zero(t, res.Lost)
	require.Less(t, res.GCPauses, 2, "the child's collector, not this process's")
	st := tb.Stats()
	require.Equal(t, "fiber", st.Profiles["client"].Name)
	require.Equal(t, tb.PID, st.PID)
	require.Zero(t, st.GCCycles, "the emulator's process does not collect")
	_, ok := tb.Cross("client")
	require.False(t, ok, "no cross traffic")

	require.NoError(t, tb.Close())
	_, err = os.Stat("/run/netns/doxlab-tsep-client")
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoDirExists(t, stateDir("tsep"))
}

// TestSeparateProcessKilled: when the emulator's process dies, the
// testbed's calls say so, and Close still removes everything.
func TestSeparateProcessKilled(t *testing.T) {
	tb := startTB(t, Spec{Name: "tsepkill", Separate: true})
	require.NoError(t, syscall.Kill(tb.PID, syscall.SIGKILL))
	_, err := tb.Check(context.Background(), Profiles["none"], CheckOptions{Probes: 10, SkipThroughput: true})
	require.Error(t, err)
	require.ErrorContains(t, err, "the emulator's process ended")
	require.ErrorContains(t, tb.Close(), "killed", "Close says how the child ended")
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "doxlab-tsepkill-"), "left behind: %s", e.Name())
	}
}

// TestSeparateProcessFails: a child that cannot build the testbed makes
// Start fail with the child's own reason, and leaves nothing.
func TestSeparateProcessFails(t *testing.T) {
	needRoot(t)
	_, err := Start(Spec{Name: "tsepbad", Separate: true, Profile: "no-such-profile"})
	require.ErrorContains(t, err, "the emulator's process ended before the testbed was up")
	require.ErrorContains(t, err, "no-such-profile")
	require.NoDirExists(t, stateDir("tsepbad"))
}

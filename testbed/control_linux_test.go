package testbed

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ask writes line to testbed name's control socket and returns the
// answer it reads back.
func ask(t *testing.T, name, line string) response {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(stateDir(name), "ctl.sock"))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Write([]byte(line + "\n"))
	require.NoError(t, err)
	var r response
	require.NoError(t, json.NewDecoder(bufio.NewReader(c)).Decode(&r), "an answer to %q", line)
	return r
}

// TestControlSocket: another process switches a running testbed's
// profiles and reads its counters through the control socket; every
// request it cannot act on is answered with the reason, and the socket
// goes on serving, also while a client holds a connection saying
// nothing. Only its owner may connect, whatever the umask: the socket
// switches the testbed's links.
func TestControlSocket(t *testing.T) {
	needRoot(t)
	old := syscall.Umask(0) // a umask that keeps nothing from anyone
	tb := startTB(t, Spec{Name: "tctl"})
	syscall.Umask(old)
	sock := filepath.Join(stateDir("tctl"), "ctl.sock")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Zero(t, fi.Mode().Perm()&0o022, "no one but its owner may write to the socket, and so connect: %v", fi.Mode())

	idle, err := net.Dial("unix", sock) // a client that never asks
	require.NoError(t, err)
	defer idle.Close()

	require.NoError(t, SetProfile("tctl", "client", Profiles["dsl"]))
	st, err := ReadStats("tctl")
	require.NoError(t, err)
	require.Equal(t, "dsl", st.Profiles["client"].Name, "the counters say the profile the socket set")
	require.Equal(t, "none", st.Profiles["server"].Name)
	require.Equal(t, os.Getpid(), st.PID, "this process runs the emulator")
	require.Contains(t, st.Hosts, "client")
	saved, err := Load("tctl")
	require.NoError(t, err)
	require.Equal(t, "dsl", saved.Profiles["client"].Name, "the state on disk follows, for 'testbed status'")

	err = SetProfile("tctl", "nosuch", Profiles["fiber"])
	require.ErrorContains(t, err, `testbed tctl: no host "nosuch"`)
	err = SetProfile("tctl", "client", Profile{Name: "odd", Down: Direction{Loss: 2}})
	require.ErrorContains(t, err, "down.loss 2 is not a probability")

	for _, c := range []struct{ line, want string }{
		{`not json`, "bad request: "},
		{`{"op":"explode"}`, "unknown op explode"},
		{`{"op":"profile","host":"client"}`, "no profile"},
		{`{"op":"check","profile":{"name":"none"}}`, "no profile or options"},
	} {
		require.Contains(t, ask(t, "tctl", c.line).Error, c.want, c.line)
	}
	r := ask(t, "tctl", `{"op":"cross","host":"client"}`)
	require.Empty(t, r.Error)
	require.Nil(t, r.Cross, "no cross traffic runs on a profile without it")

	st, err = ReadStats("tctl")
	require.NoError(t, err, "still serving after all that")
	require.Equal(t, "dsl", st.Profiles["client"].Name, "and nothing refused changed a thing")

	require.NoError(t, tb.Close())
	_, err = ReadStats("tctl")
	require.ErrorContains(t, err, "testbed tctl is not running")
}

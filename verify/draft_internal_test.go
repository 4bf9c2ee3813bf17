package verify

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTryDraftsReadsItsHelper: what the draft client (aioquic 0.9.25, a
// helper program) says becomes the candidate's verdict: an answer over
// a draft is doq, with the draft's version and ALPN; a handshake with a
// DoQ ALPN and no answer is handshake-only, naming the drafts tried; a
// helper that fails, or prints what is not its JSON, is said to have,
// and earns no verdict; with no draft offered no helper runs. The real
// helper against a draft-29 server runs on the testbed (TestVerifyDoQ);
// a shell stands in here for what it cannot be made to say.
func TestTryDraftsReadsItsHelper(t *testing.T) {
	offered := []string{"0x00000001", "0xff00001d", "0x1a2a3a4a", "0xff000020"}
	var argv []string
	try := func(script string, offered []string) (bool, *DoQ) {
		argv = nil
		o := Options{Name: "example.com", Timeout: 5 * time.Second, Command: func(a ...string) *exec.Cmd {
			argv = a
			return exec.Command("sh", "-c", script)
		}}
		r := &DoQ{Target: "192.0.2.1:853", Verdict: "quic-not-doq", Offered: offered}
		return tryDrafts(context.Background(), r.Target, o, r), r
	}

	ok, r := try(`echo '{"Version": "draft-29", "ALPN": "doq-i02", "Rcode": "NOERROR"}'`, offered)
	require.True(t, ok)
	require.Equal(t, []string{DraftPython, "-", "192.0.2.1", "853", "example.com", "5.0", "ff00001d", "ff000020"}, argv, "the drafts offered, not v1 or a greased version")
	require.Equal(t, DoQ{Target: "192.0.2.1:853", Verdict: "doq", Offered: offered, QUICVersion: "draft-29", ALPN: "doq-i02", Rcode: "NOERROR"}, *r)

	ok, r = try(`echo '{"Version": "draft-29", "ALPN": "doq-i02", "Error": "no answer in 5 s"}'`, offered)
	require.False(t, ok)
	require.Equal(t, "handshake-only", r.Verdict)
	require.Equal(t, "over ff00001d,ff000020: no answer in 5 s", r.Error)
	require.Equal(t, "draft-29", r.QUICVersion)

	ok, r = try(`echo '{"Error": "no common version"}'`, offered)
	require.False(t, ok)
	require.Equal(t, "quic-not-doq", r.Verdict, "no handshake: the verdict stands")
	require.Equal(t, "over ff00001d,ff000020: no common version", r.Error)

	ok, r = try(`echo 'Traceback (most recent call last):'`, offered)
	require.False(t, ok)
	require.Equal(t, "quic-not-doq", r.Verdict)
	require.Contains(t, r.Error, "draft client: invalid character")

	ok, r = try(`exit 3`, offered)
	require.False(t, ok)
	require.Contains(t, r.Error, "draft versions offered, but the draft client failed (exit status 3; is "+DraftPython+" installed?)")

	ok, r = try(`echo '{}'`, []string{"0x00000001", "0x6b3343cf"})
	require.False(t, ok)
	require.Nil(t, argv, "no draft offered: no helper")
	require.Empty(t, r.Error)
}

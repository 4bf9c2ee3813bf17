package web

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment/internal/pages"
)

// TestWebDefaultsRefuseWhatCannotRun: an unknown engine, transport, H3
// mode, stub state, DNS mode or placement is refused with what is
// allowed, and so is doxlab's loader with decoupled DNS (it resolves
// through the stub only); the setup names what the flags change of the
// papers' (a CDN with ORIGIN frames, without them, or no frames at all).
func TestWebDefaultsRefuseWhatCannotRun(t *testing.T) {
	for _, c := range []struct {
		w    *Web
		want string
	}{
		{&Web{Engines: []string{"firefox"}}, `engine "firefox" is not chromium or doxlab`},
		{&Web{Transports: []string{"doq-emulated"}}, `not "doq-emulated"`},
		{&Web{H3: []string{"2rtt"}}, `h3 mode "2rtt"`},
		{&Web{StubStates: []string{"lukewarm"}}, `stub state "lukewarm"`},
		{&Web{DNSModes: []string{"hosts"}}, `dns mode "hosts"`},
		{&Web{Placement: "moon"}, `placement "moon": want separate or cdn`},
		{&Web{Engines: []string{pages.EngineDoxlab}, DNSModes: []string{"decoupled"}}, "the doxlab engine resolves through the stub only"},
	} {
		require.ErrorContains(t, c.w.defaults(), c.want)
	}
	w := &Web{}
	require.NoError(t, w.defaults())
	require.Equal(t, []string{"udp", "doh2", "doq"}, w.Transports, "the IMC 2022 study's three")
	require.Equal(t, []string{pages.EngineChromium}, w.Engines)
	require.Equal(t, 10, w.Repeat)
	for _, c := range []struct {
		w    *Web
		want string
	}{{&Web{}, ""}, {&Web{Placement: "cdn"}, "cdn+origins"}, {&Web{Placement: "cdn", NoOrigin: true}, "cdn"}, {&Web{NoOrigin: true}, "no-origin"}} {
		require.NoError(t, c.w.defaults())
		require.Equal(t, c.want, c.w.setup(), "placement %s, no ORIGIN frames %v", c.w.Placement, c.w.NoOrigin)
	}
}

// TestStubEtc: the files a browser reads over /etc name the stub alone
// (an address: resolv.conf takes no port, the stub listens on 53),
// with one try and no search list (a lookup the stub fails is the
// sample's), localhost from the hosts file, and DNS after it.
func TestStubEtc(t *testing.T) {
	dir := t.TempDir()
	etc, err := stubEtc(dir, "10.199.0.1")
	require.NoError(t, err)
	read := func(name string) string {
		require.Equal(t, filepath.Join(dir, "etc-"+name), etc[name])
		b, err := os.ReadFile(etc[name])
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "nameserver 10.199.0.1\noptions timeout:10 attempts:1\n", read("resolv.conf"))
	require.Equal(t, "hosts: files dns\n", read("nsswitch.conf"))
	require.Contains(t, read("hosts"), "127.0.0.1 localhost")
	_, err = stubEtc(filepath.Join(dir, "missing"), "10.199.0.1")
	require.Error(t, err)
}

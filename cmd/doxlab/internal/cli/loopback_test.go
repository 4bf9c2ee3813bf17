package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExperimentOnLoopback is a contributor's first run without root:
// `doxlab experiment dns-rtt --quick --net loopback` measures on the
// loopback net with the profile none (the default there), says that no
// link was emulated and earns no verdict in round trips; its resume on
// the testbed is refused as another design, naming the flag, until
// --force; an emulated profile asked of loopback fails with one line
// that says what it needs.
func TestExperimentOnLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the loopback net binds port 53: root, or the experiment packages' tests (testutil.Rootless)")
	}
	db := filepath.Join(t.TempDir(), "lb.db")
	code, out, errOut := run("experiment", "dns-rtt", "--quick", "--net", "loopback", "--transports", "udp,doq", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^none\s+udp\s+fresh\s+3/3`, out, "the profile none, by default on loopback")
	require.Contains(t, out, "links: none emulated (the loopback net): 2 checks measured nothing")
	require.NotRegexp(t, `(?m)^(holds|differs): `, out, "no verdict on loopback")
	id := regexp.MustCompile(`experiment (dnsrtt-\S+), stored`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)

	code, _, errOut = run("experiment", "dns-rtt", "--resume", id[1], "--net", "testbed", "--store", db)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `net: "loopback" → "testbed"`)
	require.Contains(t, errOut, "--force")

	code, _, errOut = run("experiment", "dns-rtt", "--net", "loopback", "--profiles", "4g", "--transports", "udp", "--store", db)
	require.Equal(t, 1, code)
	require.Regexp(t, `profile 4g needs the testbed \(--net testbed, as root\)`, errOut)
	code, _, errOut = run("experiment", "dns-rtt", "--net", "moon", "--store", db)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, `net "moon" is not testbed or loopback`)
}

// TestExperimentRefusesBadDesigns: a negative number or duration, which
// an experiment's config would take for its default, and a profile,
// transport or condition it does not know are usage errors, refused
// before any network is built.
func TestExperimentRefusesBadDesigns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "bad.db")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"web", "--timeout", "-1s"}, exitUsage, "--timeout must not be negative"},
		{[]string{"server-load", "--start", "-5"}, exitUsage, "--start must not be negative"},
		{[]string{"dns-rtt", "--repeat", "-3"}, exitUsage, `--repeat "-3": want 1 or more`},
		{[]string{"dns-rtt", "--net", "loopback", "--transports", "bogus"}, exitUsage, `unknown transport "bogus"`},
		{[]string{"dns-rtt", "--net", "loopback", "--conditions", "sometimes"}, exitUsage, `unknown condition "sometimes"`},
		{[]string{"dns-rtt", "--net", "loopback", "--profiles", "moon"}, exitUsage, `unknown profile "moon"`},
		{[]string{"web", "--net", "loopback", "--profiles", "fiber,moon"}, exitUsage, `unknown profile "moon"`},
		{[]string{"coalescing", "--net", "loopback", "--profiles", "moon"}, exitUsage, `unknown profile "moon"`},
		{[]string{"hol", "--net", "loopback", "--transports", "carrier-pigeon"}, exitUsage, `unknown transport "carrier-pigeon"`},
		{[]string{"overhead", "--net", "loopback", "--transports", "carrier-pigeon"}, exitUsage, `transport "carrier-pigeon" is not udp, tcp, dot, doh1, doh2, doh3 or doq`},
		{[]string{"overhead", "--net", "loopback", "--transports", "odoh"}, exitUsage, `transport "odoh" is not udp`},
		{[]string{"overhead", "--net", "loopback", "--modes", "reused"}, exitUsage, `mode "reused" is not new or persistent`},
		{[]string{"overhead", "--net", "loopback", "--certs", "medium"}, exitUsage, `certificate size "medium" is not small or large`},
		{[]string{"amplification", "--net", "loopback", "--validation", "tokens"}, exitUsage, `validation "tokens" is not none, retry or token`},
		{[]string{"amplification", "--net", "loopback", "--key-shares", "hybrid"}, exitUsage, `key share "hybrid" is not pq or classic`},
		{[]string{"privacy", "--net", "loopback", "--profiles", "moon"}, exitUsage, `unknown profile "moon"`},
	} {
		code, out, errOut := run(append(append([]string{"experiment"}, c.args...), "--store", db)...)
		require.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.msg)
		require.NotContains(t, errOut, "continue it with", "%v: no run begun", c.args)
		require.Empty(t, out)
	}
}

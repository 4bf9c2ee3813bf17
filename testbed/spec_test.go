package testbed

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpecDefaults: a testbed with nothing asked for is two hosts,
// client and server, on 10.200.0.0/24 with profile none and the
// emulator, the server their nameserver (a host called resolver, where
// there is one).
func TestSpecDefaults(t *testing.T) {
	s := Spec{}
	require.NoError(t, s.defaults())
	require.Equal(t, Spec{Name: "doxlab", Hosts: []string{"client", "server"}, Subnet: "10.200.0.0/24", Profile: "none", Backend: "userspace", Nameserver: "server"}, s)
	s = Spec{Hosts: []string{"client", "resolver", "server"}}
	require.NoError(t, s.defaults())
	require.Equal(t, "resolver", s.Nameserver)
	s = Spec{Hosts: []string{"client", "db"}, HostNameservers: map[string]string{"client": "db", "db": "192.0.2.53"}, Backend: "netem"}
	require.NoError(t, s.defaults(), "a host or an address")
}

// TestSpecRefusals: each spec a testbed cannot be built from is refused
// before anything is built, in one line naming what is wrong. A host's
// name goes into /etc/hosts and its namespace's name, so it is held to
// a testbed name's characters.
func TestSpecRefusals(t *testing.T) {
	many := make([]string, 251)
	for i := range many {
		many[i] = "h" + strings.Repeat("x", i%30) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
	}
	for _, c := range []struct {
		spec Spec
		msg  string
	}{
		{Spec{Name: "a/b"}, `bad testbed name "a/b"`},
		{Spec{Name: "-x"}, `bad testbed name "-x"`},
		{Spec{Hosts: []string{"client", "client"}}, `host "client" named twice`},
		{Spec{Hosts: []string{"client", ""}}, `bad host name ""`},
		{Spec{Hosts: []string{"client", "a b"}}, `bad host name "a b"`},
		{Spec{Hosts: []string{"client", "x\n10.0.0.1\tbank.example"}}, `bad host name "x\n10.0.0.1\tbank.example"`},
		{Spec{Hosts: []string{"client", "../etc"}}, `bad host name "../etc"`},
		{Spec{Hosts: []string{"client", strings.Repeat("h", 41)}}, "bad host name"},
		{Spec{Hosts: []string{"client", "switch"}}, `host name "switch" is taken by the namespace that joins the hosts`},
		{Spec{Hosts: many}, "at most 250 hosts"},
		{Spec{Subnet: "10.200.0.0/16"}, `subnet "10.200.0.0/16": want an IPv4 /24`},
		{Spec{Subnet: "fd00::/120"}, "want an IPv4 /24"},
		{Spec{Subnet: "ten"}, "want an IPv4 /24"},
		{Spec{Backend: "ns3"}, `unknown backend "ns3" (want userspace or netem)`},
		{Spec{Backend: "netem", PcapDir: "/tmp/x"}, "the netem backend has no link capture"},
		{Spec{HostNameservers: map[string]string{"laptop": "server"}}, `nameserver for unknown host "laptop"`},
		{Spec{HostNameservers: map[string]string{"client": "resolver"}}, `nameserver of client: "resolver" is neither a host nor an IP address`},
	} {
		s := c.spec
		err := s.defaults()
		require.ErrorContains(t, err, c.msg, "%+v", c.spec)
		require.NotContains(t, err.Error(), "\n", "one line, the name quoted")
	}
	for _, ok := range []string{"client", "sin-2", "fra1", "web_1", "cdn.test", strings.Repeat("h", 40)} {
		s := Spec{Hosts: []string{ok, "server"}}
		require.NoError(t, s.defaults(), ok)
	}
}

package bench_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
)

// TestReadQueries: a query mix in dnsperf's format, as a user brings
// one: NAME TYPE a line in any case, a name alone asking for A, RFC
// 3597's TYPEnnn for a type by number, comments, blank lines, a file
// saved on Windows (CRLF, a byte order mark); a line that is wrong is
// an error naming the file and line, and a file of no queries says so.
func TestReadQueries(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	p := write("mix.txt", "\ufeff# a mix\r\nexample.org A\r\n\r\nwww.example.org aaaa\r\n  example.net\tHTTPS\r\nexample.com TYPE65\r\nexample.edu type257\r\n_dns.resolver.arpa. SVCB\r\n")
	qs, err := bench.ReadQueries(p)
	require.NoError(t, err)
	require.Equal(t, []bench.Query{
		{Name: "example.org.", Type: dns.TypeA},
		{Name: "www.example.org.", Type: dns.TypeAAAA},
		{Name: "example.net.", Type: dns.TypeHTTPS},
		{Name: "example.com.", Type: dns.TypeHTTPS},
		{Name: "example.edu.", Type: dns.TypeCAA},
		{Name: "_dns.resolver.arpa.", Type: dns.TypeSVCB},
	}, qs)
	qs, err = bench.ReadQueries(write("alone.txt", "example.org\n"))
	require.NoError(t, err)
	require.Equal(t, []bench.Query{{Name: "example.org.", Type: dns.TypeA}}, qs, "a name alone asks for A")

	for name, c := range map[string]struct{ text, err string }{
		"unknown type":    {"example.org A\nexample.org BOGUS\n", `:2: unknown type "BOGUS"`},
		"type past 65535": {"example.org TYPE65536\n", `:1: unknown type "TYPE65536"`},
		"long label":      {strings.Repeat("a", 64) + ".example A\n", ":1: "},
		"long name":       {strings.Repeat("abcdefghi.", 26) + " A\n", ":1: a name of 260 octets"},
		"a megabyte name": {strings.Repeat("x", 1<<19) + "\n", ":1: a name of 524289 octets"},
		"empty":           {"# nothing\n\n", ": no queries"},
		"a line too long": {"example.org A\n" + strings.Repeat("x", 2<<20) + "\n", "too long"},
	} {
		p := write(strings.ReplaceAll(name, " ", "-")+".txt", c.text)
		_, err := bench.ReadQueries(p)
		require.ErrorContains(t, err, c.err, name)
		require.ErrorContains(t, err, p, "%s: names the file", name)
		require.NotContains(t, err.Error(), "\n", name)
		require.Less(t, len(err.Error()), 400, "%s: one line, not the line it read", name)
	}
	_, err = bench.ReadQueries(filepath.Join(dir, "missing.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

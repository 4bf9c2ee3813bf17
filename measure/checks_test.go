package measure_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// TestOutcomeTimesOnlyAnswers: an exchange is answered when a whole
// answer came with an rcode taken as one (NOERROR and NXDOMAIN unless
// the campaign says otherwise); every other one is named by what it
// failed with, an old store's missing rcode read from its status.
func TestOutcomeTimesOnlyAnswers(t *testing.T) {
	a := measure.DefaultAnswers()
	for _, c := range []struct {
		status transport.Status
		rcode  string
		want   string
	}{
		{transport.StatusOK, "NOERROR", ""},
		{transport.StatusNXDomain, "NXDOMAIN", ""},
		{transport.StatusRcode, "REFUSED", "REFUSED"},
		{transport.StatusServFail, "SERVFAIL", "SERVFAIL"},
		{transport.StatusTruncated, "NOERROR", "truncated"},
		{transport.StatusTimeout, "", "timeout"},
		{"", "", "unknown"},
		{transport.StatusOK, "", ""}, // an old store: no rcode, the status says NOERROR
		{transport.StatusServFail, "", "SERVFAIL"},
		{transport.StatusRcode, "", "rcode-error"},
	} {
		require.Equal(t, c.want, a.Outcome(c.status, c.rcode), "%s %s", c.status, c.rcode)
		require.Equal(t, c.want == "", a.Answered(c.status, c.rcode))
	}
	refusedToo, err := measure.ParseAnswers([]string{" noerror", "REFUSED", "NOERROR"})
	require.NoError(t, err)
	require.Equal(t, []string{"NOERROR", "REFUSED"}, refusedToo.Rcodes(), "upper case, once each")
	require.True(t, refusedToo.Answered(transport.StatusRcode, "REFUSED"))
	require.False(t, refusedToo.Answered(transport.StatusNXDomain, "NXDOMAIN"), "only the rcodes named")
	_, err = measure.ParseAnswers([]string{"MAYBE"})
	require.ErrorContains(t, err, `"MAYBE" is not an rcode`)
	def, err := measure.ParseAnswers(nil)
	require.NoError(t, err)
	require.Equal(t, measure.DefaultOKRcodes, def.Rcodes())
	require.Equal(t, measure.DefaultOKRcodes, measure.Answers{}.Rcodes(), "the zero value takes the defaults")
	require.Equal(t, "unknown", a.SampleOutcome(&measure.Sample{}))
}

// TestInputChecks: targets, pages, labels and vantage names are checked
// before they reach a terminal, a CSV file or a job row.
func TestInputChecks(t *testing.T) {
	for _, ok := range []string{"dns.example", "192.0.2.1", "[2001:db8::1]", "quic://dns.example:853", "odoh://p.example/dns-query?target=r.example"} {
		require.NoError(t, measure.CheckTarget(ok), ok)
	}
	for bad, why := range map[string]string{"dns example": "not a host", "a\x1bb": "control characters", "ftp://x": "unknown scheme", "x:53": "not a host"} {
		require.ErrorContains(t, measure.CheckTarget(bad), why, bad)
	}
	require.NoError(t, measure.CheckPage("https://www.example.com/a?b"))
	for bad, why := range map[string]string{"ftp://x/": "not an http", "https://u:p@x/": "credentials", "https:///": "no host", "https://bad host/": "not a URL"} {
		require.ErrorContains(t, measure.CheckPage(bad), why, bad)
	}
	require.NoError(t, measure.CheckVantageName("fra-1"))
	for _, bad := range []string{"FRA", "fra--1", "-fra", "fra.1"} {
		require.Error(t, measure.CheckVantageName(bad), bad)
	}
	require.NoError(t, measure.CheckLabel("Frankfurt, DE"))
	require.Error(t, measure.CheckLabel("a\nb"))
	require.Error(t, measure.CheckLabel(string([]byte{0xff})))

	u, err := measure.URLFor("doq", "2001:db8::1")
	require.NoError(t, err)
	require.Equal(t, "quic://[2001:db8::1]:853", u)
	u, err = measure.URLFor("doh2", "dns.example")
	require.NoError(t, err)
	require.Equal(t, "https://dns.example:443/dns-query", u)
	_, err = measure.URLFor("odoh", "r.example")
	require.ErrorContains(t, err, "goes through a proxy: give r.example as a URL")
	_, err = measure.URLFor("pigeon", "x")
	require.ErrorContains(t, err, `unknown transport "pigeon"`)
}

// TestListFiles: a targets file is one target a line with # comments,
// its notes kept by target, a bad line named by file and line; a Tranco
// list gives home-page URLs of its first domains, and a line that is
// not one is named.
func TestListFiles(t *testing.T) {
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets")
	require.NoError(t, os.WriteFile(targets, []byte("# resolvers\n192.0.2.1 # doq: v1; region=EU\n\ndns.example\n"), 0o644))
	got, err := measure.Targets([]string{"udp://198.51.100.1"}, targets)
	require.NoError(t, err)
	require.Equal(t, []string{"udp://198.51.100.1", "192.0.2.1", "dns.example"}, got)
	notes, err := measure.TargetNotes(targets)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"192.0.2.1": "doq: v1; region=EU"}, notes)
	// As an editor saves it, a byte order mark first and CRLF lines: the
	// first target's note was kept under the mark, and its region lost.
	require.NoError(t, os.WriteFile(targets, []byte("\ufeff192.0.2.1 # region=EU\r\n192.0.2.2 # region=AS\r\n"), 0o644))
	got, err = measure.ReadTargets(targets)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1", "192.0.2.2"}, got)
	notes, err = measure.TargetNotes(targets)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"192.0.2.1": "region=EU", "192.0.2.2": "region=AS"}, notes)
	require.NoError(t, os.WriteFile(targets, []byte("192.0.2.1\nnot a host\n"), 0o644))
	_, err = measure.ReadTargets(targets)
	require.ErrorContains(t, err, "targets:2")

	tranco := filepath.Join(dir, "tranco.csv")
	require.NoError(t, os.WriteFile(tranco, []byte("1,google.com\n2,example.org\n3,wikipedia.org\n"), 0o644))
	pages, err := measure.Tranco(tranco, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"https://google.com/", "https://example.org/"}, pages)
	require.NoError(t, os.WriteFile(tranco, []byte("1,google.com\ngoogle.com\n"), 0o644))
	_, err = measure.Tranco(tranco, 10)
	require.ErrorContains(t, err, "tranco.csv:2: not a Tranco line")
}

// TestTrancoAsServed: a Tranco list as a user has it (CRLF lines, a byte
// order mark a spreadsheet added, a million lines of which the top are
// read): its top; a line that is no rank,domain is named by its line
// even past a byte order mark.
func TestTrancoAsServed(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("\ufeff1,google.com\r\n2,example.org\r\n")
	for i := 3; i <= 200_000; i++ {
		fmt.Fprintf(&b, "%d,site%d.example\r\n", i, i)
	}
	b.WriteString("not,a line\r\n")
	p := filepath.Join(dir, "top-1m.csv")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	pages, err := measure.Tranco(p, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"https://google.com/", "https://example.org/", "https://site3.example/"}, pages)
	_, err = measure.Tranco(p, 300_000)
	require.ErrorContains(t, err, "top-1m.csv:200001: not a Tranco line")
}

package measure_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

func TestLoadCampaignErrorsNameFileLineField(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"targets: [10.0.0.1]\ntransports: [udp, smtp]\n":     "c.yaml:2: transports[2]: unknown transport \"smtp\"",
		"name: x\ntargets: [10.0.0.1]\nconditions: [warm]\n": "c.yaml:3: conditions[1]: unknown condition",
		"name: x\n":                                                               "c.yaml: targets: no targets",
		"targets: [\"not a host\"]\n":                                             "c.yaml:1: targets[1]:",
		"targets: [10.0.0.1]\nquery: {type: NOPE}\n":                              "c.yaml:2: query.type: unknown record type",
		"targets: [10.0.0.1]\nretries: 99\n":                                      "c.yaml:2: retries:",
		"targets: [10.0.0.1]\ntransport: [udp]\n":                                 "c.yaml:2: transport: unknown field (did you mean transports?)",
		"targets: [10.0.0.1]\nrepat: 3\n":                                         "c.yaml:2: repat: unknown field (did you mean repeat?)",
		"targets: [10.0.0.1]\nrepeat: three\n":                                    "c.yaml:2: repeat: want a whole number, got \"three\"",
		"targets: [10.0.0.1]\nrate: fast\n":                                       "c.yaml:2: rate: want a number, got \"fast\"",
		"targets: 10.0.0.1\n":                                                     "c.yaml:1: targets: want a list",
		"targets: [10.0.0.1]\ntimeout: soon\n":                                    "c.yaml:2: timeout: want a duration with its unit, such as 500ms, 10s or 2h, got \"soon\"",
		"targets: [10.0.0.1]\ntimeout: 5\n":                                       "c.yaml:2: timeout: want a duration with its unit",
		"name: x\ntargets: [10.0.0.1,\nrepeat: 3\n":                               "c.yaml:2: did not find expected ',' or ']' (a list opened with [ on this line is not closed)",
		"targets: [10.0.0.1]\ntls: {ca: /nonexistent.pem}\n":                      "c.yaml:2: tls.ca:",
		"targets: [10.0.0.1]\nvantages: [{name: Frankfurt}]\n":                    "c.yaml:2: vantages[1].name: vantage name \"Frankfurt\"",
		"targets: [10.0.0.1]\nvantages: [{name: a}, {name: a}]\n":                 "c.yaml:2: vantages[2].name: \"a\" named twice",
		"vantages: [{name: a, targets: [1.2.3.4]}, {name: b}]\n":                  "c.yaml: targets: no targets",
		"targets: [10.0.0.1]\nvantages: [{name: a, asn: -1}]\n":                   "c.yaml:2: vantages[1].asn: -1 is negative",
		"targets: [10.0.0.1]\nevery: -1h\n":                                       "c.yaml:2: every: -1h0m0s is negative",
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nrounds: 4\n":                 "c.yaml:3: rounds: 4 rounds need every",
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nevery: 48h\n":                "c.yaml:3: every: say how many rounds",
		"targets: [10.0.0.1]\nevery: 48h\nrounds: 4\n":                            "rounds are planned for workers",
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nevery: 1h\nrounds: 100000\n": "rounds: 100000 is not 1..1000",
		"targets: [10.0.0.1]\nconcurrency: 100000\n":                              "c.yaml:2: concurrency: 100000 is not 0 (one) to 1000",
		// A yearly round a thousand times wrapped the last rounds' due
		// times into the past: every one of them due at once.
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nevery: 8760h\nrounds: 1000\n": "c.yaml:3: every: 8760h0m0s between 1000 rounds spans 996 years, more than 20",
		"name: x\ntargets: [1.1.1.1, \"udp://127.0.0.1:53\"]\n":                    "c.yaml:2: targets: \"udp://127.0.0.1:53\": special-purpose address not allowed: 127.0.0.1 is in 127.0.0.0/8, loopback",
		"targets: [1.1.1.1]\nvantages: [{name: a, targets: [169.254.169.254]}]\n":  "c.yaml:2: vantages[1].targets: \"169.254.169.254\": special-purpose",
		"name: x\ntargets: [127.1, \"https://0x7f000001/dns-query\"]\n":            "127.0.0.1 is in 127.0.0.0/8, loopback",
		"targets: [1.1.1.1]\nallow_special: [8.8.8.0/24]\n":                        "c.yaml:2: allow_special: 8.8.8.0/24 is not special-purpose",
		"targets: [1.1.1.1]\nallow_special: [10.0.0.0/33]\n":                       "c.yaml:2: allow_special:",
		// An item of the wrong shape keeps its place: yaml.v3 left it
		// out, and the next item's error was named as this one's.
		"targets:\n  - [1.1.1.1]\n  - \"not a host\"\n":                   "c.yaml:3: targets[2]: \"not a host\"",
		"targets: [1.1.1.1]\nvantages:\n  - fra\n  - {name: Frankfurt}\n": "c.yaml:4: vantages[2].name: vantage name \"Frankfurt\"",
	} {
		p := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := measure.LoadCampaign(p)
		require.ErrorContains(t, err, want, body)
	}
	// Every error in one pass, by line, one a line.
	p := filepath.Join(dir, "many.yaml")
	require.NoError(t, os.WriteFile(p, []byte("targets: [1.1.1.1]\nrepeat: three\nrepat: 2\nconditions: [warm]\nquery: {type: NOPE, nme: x}\n"), 0o644))
	_, err := measure.LoadCampaign(p)
	require.Error(t, err)
	require.Equal(t, []string{
		p + ":2: repeat: want a whole number, got \"three\"",
		p + ":3: repat: unknown field (did you mean repeat?)",
		p + ":4: conditions[1]: unknown condition \"warm\" (want fresh, pam, resumed or 0rtt)",
		p + ":5: query.nme: unknown field (did you mean name?)",
		p + ":5: query.type: unknown record type \"NOPE\"",
	}, strings.Split(err.Error(), "\n"))

	p = filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(p, []byte("name: ok\ntargets: [10.0.0.1, \"quic://[::1]:853\"]\nallow_special: [10.0.0.0/8, \"::1\"]\ntransports: [doq]\nconditions: [pam]\nquery: {name: test.com, type: AAAA, rd: false}\nrepeat: 2\ntimeout: 2s\nretries: 1\n"), 0o644))
	c, err := measure.LoadCampaign(p)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, c.Timeout)
	require.False(t, *c.Query.RD)
}

// TestRetries: a server that drops everything gets the task retried, and
// the sample says how many attempts it took.
func TestRetries(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}, Faults: server.Faults{DropProbability: 1}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	var got []*measure.Sample
	var progress []int
	err = measure.Run(context.Background(), measure.Spec{Targets: []string{"udp://" + srv.Addr("udp").String()}, Timeout: 200 * time.Millisecond, Retries: 2,
		Progress: func(done, total int) { progress = append(progress, done, total) }}, func(x *measure.Sample) { got = append(got, x) })
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 3, got[0].Attempts)
	require.Equal(t, transport.StatusTimeout, got[0].Status)
	require.Equal(t, []int{1, 1}, progress)
}

func TestExampleCampaign(t *testing.T) {
	c, err := measure.LoadCampaign("../examples/campaign.yaml")
	require.NoError(t, err)
	require.Equal(t, "pam-resolvers", c.Name)
	require.Len(t, c.Conditions, 4)
}

func TestExampleVantagesCampaign(t *testing.T) {
	c, err := measure.LoadCampaign("../examples/campaign-vantages.yaml")
	require.NoError(t, err)
	require.Len(t, c.Vantages, 3)
	require.Equal(t, 3320, c.Vantages[0].ASN)
	require.Equal(t, []string{"10.200.0.3"}, c.Vantages[2].Targets, "a vantage point with resolvers of its own")
}

// TestExamplePagesCampaign loads the page-load example beside the files
// it names, and checks a Tranco list's top, the default transports and
// what a page-load spec refuses.
func TestExamplePagesCampaign(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../examples/campaign-pages.yaml")
	require.NoError(t, err)
	spec := filepath.Join(dir, "pages.yaml")
	require.NoError(t, os.WriteFile(spec, b, 0o644))
	for name, body := range map[string]string{"resolvers.txt": "9.9.9.9 # doq: v1\n", "blocklist.txt": "192.0.2.0/24\n", "opt-out.txt": "", "top.csv": "1,google.com\n2,facebook.com\n3,example.org\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	wd, _ := os.Getwd()
	require.NoError(t, os.Chdir(dir))
	t.Cleanup(func() { os.Chdir(wd) })
	c, err := measure.LoadCampaign(spec)
	require.NoError(t, err)
	require.Equal(t, 4, c.Rounds)
	s, err := c.Spec()
	require.NoError(t, err)
	require.Equal(t, []string{"https://www.wikipedia.org/", "https://example.com/"}, s.Pages)
	tasks, err := s.Tasks()
	require.NoError(t, err)
	require.Len(t, tasks, 1*3*2, "targets × transports × pages")
	for _, tk := range tasks {
		require.NotEmpty(t, tk.Page)
		require.Empty(t, tk.Condition)
	}
	require.Error(t, s.Options.Refuse(netip.MustParseAddr("192.0.2.9")), "the blocklist binds every exchange")
	require.NoError(t, s.Options.Refuse(netip.MustParseAddr("9.9.9.9")))
	require.ErrorIs(t, s.Options.Refuse(netip.MustParseAddr("169.254.169.254")), blocklist.ErrSpecial, "and special-purpose addresses, unless allowed")

	top, err := measure.Tranco("top.csv", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"https://google.com/", "https://facebook.com/"}, top)

	for body, msg := range map[string]string{
		"pages: {urls: [https://a.example/]}\n":                                       "contact",
		"pages: {urls: [https://a.example/]}\ncontact: x\nconditions: [fresh]\n":      "conditions",
		"pages: {urls: [ftp://a.example/]}\ncontact: x\n":                             "not an http or https URL",
		"pages: {urls: [\"https://u:p@a.example/\"]}\ncontact: x\n":                   "credentials",
		"pages: {tranco: bad.csv}\ncontact: x\n":                                      "bad.csv",
		"pages: {urls: [https://a.example/], stub: sometimes}\ncontact: x\n":          "stub",
		"pages: {urls: [https://a.example/]}\ncontact: x\nblocklist: [missing.txt]\n": "blocklist",
		"pages: {file: pages.txt}\ncontact: x\n":                                      "pages.txt:3",
		"pages: {urls: [\"http://[::1]:8080/\"]}\ncontact: x\n":                       "pages: \"http://[::1]:8080/\": special-purpose",
		// The hosts a browser reads as IPv4 addresses where Go sees
		// names: each was taken as a name the resolver would answer.
		"pages: {urls: [\"https://127.1/\"]}\ncontact: x\n":               "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://2130706433/\"]}\ncontact: x\n":          "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://0x7f.0.0.1/\"]}\ncontact: x\n":          "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://0251.0376.0251.0376/\"]}\ncontact: x\n": "169.254.169.254 is in 169.254.0.0/16",
		"pages: {urls: [\"https://127.0.0.1./\"]}\ncontact: x\n":          "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://1.2.3.256/\"]}\ncontact: x\n":           "ends in a number but is no IPv4 address",
		// And the hosts IDNA maps to one, or a browser takes for
		// loopback without asking DNS.
		"pages: {urls: [\"https://１２７.０.０.１/\"]}\ncontact: x\n":        "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/\"]}\ncontact: x\n":        "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://localhost:8080/\"]}\ncontact: x\n":   "127.0.0.1 is in 127.0.0.0/8, loopback",
		"pages: {urls: [\"https://admin.localhost./\"]}\ncontact: x\n": "127.0.0.1 is in 127.0.0.0/8, loopback",
	} {
		require.NoError(t, os.WriteFile("pages.txt", []byte("https://a.example/ # the first\n\nftp://b.example/\n"), 0o644))
		require.NoError(t, os.WriteFile("bad.csv", []byte("google.com\n"), 0o644))
		require.NoError(t, os.WriteFile("bad.yaml", []byte("name: x\ntargets: [9.9.9.9]\n"+body), 0o644))
		_, err := measure.LoadCampaign("bad.yaml")
		require.ErrorContains(t, err, msg, body)
		require.ErrorContains(t, err, "bad.yaml")
	}
}

// TestPageCampaignChecks: a page-load campaign's pages are checked when
// it is read, each error at its line: pages at a special-purpose address
// (the vantage point's loopback, a cloud's metadata service) unless
// allow_special allows them, pages that are not pages, too many, and
// the contact a browser sends.
func TestPageCampaignChecks(t *testing.T) {
	dir := t.TempDir()
	tranco := filepath.Join(dir, "tranco.csv")
	var list strings.Builder
	for i := range measure.MaxPages + 1 {
		fmt.Fprintf(&list, "%d,site%d.example\n", i+1, i)
	}
	require.NoError(t, os.WriteFile(tranco, []byte(list.String()), 0o644))
	const head = "targets: [dns.example]\ncontact: https://lab.example/\n"
	for body, want := range map[string]string{
		head + "pages: {urls: [\"https://127.0.0.1/\"]}\n":                       `c.yaml:3: pages: "https://127.0.0.1/": special-purpose address not allowed: 127.0.0.1 is in 127.0.0.0/8, loopback`,
		head + "pages: {urls: [\"http://169.254.169.254/latest/meta-data/\"]}\n": `c.yaml:3: pages: "http://169.254.169.254/latest/meta-data/": special-purpose address not allowed`,
		head + "pages: {urls: [\"https://[::1]:8443/\"]}\n":                      `c.yaml:3: pages: "https://[::1]:8443/": special-purpose address not allowed`,
		head + "pages: {urls: [\"https://u:p@site.example/\"]}\n":                `c.yaml:3: pages: page "https://u:p@site.example/": has credentials`,
		head + "pages: {urls: [\"file:///etc/passwd\"]}\n":                       `c.yaml:3: pages: page "file:///etc/passwd": not an http or https URL`,
		head + "pages: {}\n": "c.yaml:3: pages: no pages (give urls, file or tranco)",
		head + "pages: {tranco: " + tranco + ", top: 20000}\n":                  fmt.Sprintf("c.yaml:3: pages: %d pages, more than %d", measure.MaxPages+1, measure.MaxPages),
		head + "pages: {urls: [\"https://a.example/\"], stub: warm}\n":          `c.yaml:3: pages.stub: "warm" is not fresh, pam, resumed, 0rtt or reuse`,
		head + "pages: {urls: [\"https://a.example/\"], timeout: -1s}\n":        "c.yaml:3: pages.timeout: -1s is negative",
		head + "pages: {urls: [\"https://a.example/\"], queries: -5}\n":         "c.yaml:3: pages.queries: -5 is negative",
		head + "conditions: [fresh]\npages: {urls: [\"https://a.example/\"]}\n": "c.yaml:3: conditions: page loads take no conditions",
		"targets: [dns.example]\npages: {urls: [\"https://a.example/\"]}\n":     "c.yaml: contact: a page-load campaign says who measures",
	} {
		p := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := measure.LoadCampaign(p)
		require.ErrorContains(t, err, want, body)
	}

	// Allowed where allow_special says so; each page once, in order.
	p := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(p, []byte(head+"allow_special: [127.0.0.0/8]\npages: {urls: [\"https://127.0.0.1:8443/\", \"https://a.example/\", \"https://127.0.0.1:8443/\"], tranco: "+tranco+", top: 2}\n"), 0o644))
	c, err := measure.LoadCampaign(p)
	require.NoError(t, err)
	s, err := c.Spec()
	require.NoError(t, err)
	require.Equal(t, []string{"https://127.0.0.1:8443/", "https://a.example/", "https://site0.example/", "https://site1.example/"}, s.Pages)
	require.Equal(t, measure.PageTransports, s.Transports, "the IMC 2022 study's protocols by default")
	require.Error(t, s.Options.Refuse(netip.MustParseAddr("169.254.169.254")), "a page's name resolved to metadata is refused when loaded")
	require.NoError(t, s.Options.Refuse(netip.MustParseAddr("127.0.0.1")))
}

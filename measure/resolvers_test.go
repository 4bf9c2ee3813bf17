package measure_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/measure"
)

// TestResolversGroupByWhoAnswers: a host's URLs of distinct transports
// are one resolver named by the host; an ODoH URL belongs to its
// target's resolver, not its proxy's (whose own DoH is another); two
// URLs of one host speaking one transport are a resolver each; a target
// that does not parse is its own.
func TestResolversGroupByWhoAnswers(t *testing.T) {
	trOf := map[string]string{
		"https://res.example/dns-query":                               "doh2",
		"quic://res.example":                                          "doq",
		"odoh://proxy.example/dns-query?target=res.example/dns-query": "odoh",
		"https://proxy.example/dns-query":                             "doh2",
		"udp://twin.example":                                          "udp",
		"udp://twin.example:5353":                                     "udp",
		"not a url":                                                   "udp",
	}
	var targets []string
	for t := range trOf {
		targets = append(targets, t)
	}
	got := measure.Resolvers(targets, func(t string) string { return trOf[t] })
	require.Equal(t, map[string]string{
		"https://res.example/dns-query":                               "res.example",
		"quic://res.example":                                          "res.example",
		"odoh://proxy.example/dns-query?target=res.example/dns-query": "res.example",
		"https://proxy.example/dns-query":                             "proxy.example",
		"udp://twin.example":                                          "udp://twin.example",
		"udp://twin.example:5353":                                     "udp://twin.example:5353",
		"not a url":                                                   "not a url",
	}, got)
}

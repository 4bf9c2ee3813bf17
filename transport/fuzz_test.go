package transport

import "testing"

// The wire parsers are fuzzed in internal/dnswire; here the URL a user types.

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"udp://127.0.0.1", "quic://[::1]:853", "https://dns.example/dns-query?x", "h3://a:0", "tls://:853", "ftp://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ep, err := ParseURL(s)
		if err != nil {
			return
		}
		if ep.Host == "" || ep.Port < 1 || ep.Port > 65535 || ep.Protocol == "" {
			t.Fatalf("accepted %q as %+v", s, ep)
		}
	})
}

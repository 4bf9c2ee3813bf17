package transport_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/transport"
)

// TestRefuse checks that an address Options.Refuse refuses is never
// contacted, on every transport, also when the URL names it by a host
// name: the refusal binds once the name is resolved.
func TestRefuse(t *testing.T) {
	var asked []netip.Addr
	refuse := func(a netip.Addr) error {
		asked = append(asked, a)
		if a.IsLoopback() {
			return fmt.Errorf("loopback is blocklisted")
		}
		return nil
	}
	for _, u := range []string{"udp://127.0.0.1:1", "tcp://localhost:1", "tls://127.0.0.1:1", "https://localhost:1/dns-query", "h3://127.0.0.1:1/dns-query", "quic://localhost:1"} {
		tr, err := transport.New(u, transport.Options{Refuse: refuse})
		if err != nil {
			t.Fatal(err)
		}
		q := new(dns.Msg)
		q.SetQuestion("example.com.", dns.TypeA)
		rec, _ := tr.Exchange(context.Background(), q)
		tr.Close()
		if rec == nil || rec.Status != transport.StatusBlocked || rec.Bytes.Sent != 0 {
			t.Errorf("%s: %+v, want status blocked and nothing sent", u, rec)
		}
	}
	if len(asked) < 6 {
		t.Errorf("Refuse was asked %d times for 6 transports", len(asked))
	}
}

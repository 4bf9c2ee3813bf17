package transport_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

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

// TestRefuseBindsTheODoHTarget: an ODoH client fetches its target's
// config from the target itself, so Options.Refuse is asked of the
// target's address as of the proxy's: a target on a refused address is
// never contacted (no connection reaches it), and the exchange is
// blocked, saying which, before any query is sealed or sent.
func TestRefuseBindsTheODoHTarget(t *testing.T) {
	proxy := startHostileODoH(t)
	target, err := net.Listen("tcp", "127.0.0.9:0")
	require.NoError(t, err)
	defer target.Close()
	var reached atomic.Int32
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	var mu sync.Mutex
	var asked []netip.Addr
	refuse := func(a netip.Addr) error { // asked from the dialer's goroutine
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, a)
		if a == netip.MustParseAddr("127.0.0.9") {
			return fmt.Errorf("127.0.0.9 is blocklisted")
		}
		return nil
	}
	proxyAddr, _, _ := strings.Cut(strings.TrimPrefix(proxy.url, "odoh://"), "/")
	u := "odoh://" + proxyAddr + "/dns-query?target=" + target.Addr().String() + "/dns-query"
	tr, err := transport.New(u, transport.Options{RootCAs: proxy.roots, Refuse: refuse, Timeout: 2 * time.Second})
	require.NoError(t, err)
	defer tr.Close()
	rec, err := tr.Exchange(context.Background(), query("a.example.", dns.TypeA))
	require.Error(t, err)
	require.Equal(t, transport.StatusBlocked, rec.Status, rec.Error)
	require.Contains(t, rec.Error, "not contacting the ODoH target 127.0.0.9")
	mu.Lock()
	require.Contains(t, asked, netip.MustParseAddr("127.0.0.9"))
	mu.Unlock()
	require.Zero(t, reached.Load(), "the refused target was contacted")
	require.Zero(t, rec.ODoH.Sealed.Sent, "nothing was sealed")
	require.Zero(t, proxy.configs.Load())
}

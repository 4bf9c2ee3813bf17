package web

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/browser/confine"
	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/server"
)

// TestPagesAtRefusedAddresses: a page at an address literal the
// campaign's policy refuses (the cloud's metadata, the vantage point's
// loopback, in either family, mapped or not) is never loaded; one the
// campaign opted into, or a page by name, is left to the stub and the
// firewall; a URL that does not parse is refused too.
func TestPagesAtRefusedAddresses(t *testing.T) {
	var strict blocklist.Policy
	for _, page := range []string{"http://169.254.169.254/latest/meta-data/", "https://127.0.0.1:8443/", "https://[::1]/", "https://[::ffff:127.0.0.1]/", "http://10.0.0.1/"} {
		require.ErrorIs(t, pageRefused(page, &strict), blocklist.ErrSpecial, page)
	}
	lab := blocklist.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.200.0.0/24")}}
	require.NoError(t, pageRefused("https://10.200.0.7/", &lab))
	require.NoError(t, pageRefused("https://en.wikipedia.org/", &strict), "a name: the stub checks its answers")
	require.NoError(t, pageRefused("https://192.0.2.1/", nil), "no policy refuses nothing")
	require.Error(t, pageRefused("https://[::1/", &strict))
}

// TestBlockedLoads: a navigation counts as blocked when the stub refused
// the page's own name (its answer held a refused address; any case,
// with its root dot), or when it failed while the firewall refused
// connections; a refusal of another name, or refused connections of a
// page that loaded, do not make it blocked.
func TestBlockedLoads(t *testing.T) {
	page := "https://Shop.Example/cart"
	refusal := &server.Record{Kind: "query", QName: "shop.example.", QType: "A", Reason: string(server.ReasonBlocked)}
	ok := &browser.Load{Status: browser.LoadOK}
	require.Equal(t, "the resolver's answer for shop.example. A holds an address the campaign does not allow", blockedLoad(page, ok, []*server.Record{refusal}, nil))
	other := *refusal
	other.QName = "ads.example."
	require.Empty(t, blockedLoad(page, ok, []*server.Record{&other}, nil))

	refused := []confine.Refusal{{Addr: "169.254.169.254", Proto: "tcp", Port: 80}, {Addr: "127.0.0.1", Proto: "udp", Port: 53}}
	failed := &browser.Load{Status: "error", Error: "net::ERR_CONNECTION_REFUSED"}
	require.Equal(t, "error net::ERR_CONNECTION_REFUSED, with connections refused to 169.254.169.254:80/tcp, 127.0.0.1:53/udp", blockedLoad(page, failed, nil, refused))
	require.Empty(t, blockedLoad(page, ok, nil, refused), "it loaded: what was refused was not the page")
	require.Empty(t, blockedLoad(page, failed, nil, nil), "it failed, with nothing refused")

	hosts := pageHosts(page, &browser.Load{Resources: []browser.Resource{{Name: "https://cdn.example/a.js"}, {Name: "https://SHOP.example/b.css"}, {Name: "data:,x"}, {Name: "https://cdn.example/c.png"}}})
	require.Equal(t, []string{"shop.example", "cdn.example"}, hosts, "the page's own host first, each once")
}

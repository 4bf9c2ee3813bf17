package pages

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/corpus"
)

// shop is a three-origin page: its own host, a CDN customer's alias,
// and a third party without an HTTPS record.
var shop = corpus.Page{Name: "shop", Host: "shop.test", Origins: []corpus.Origin{
	{Host: "shop.test", Dir: "/d/shop", Party: corpus.PartyFirst, TTL: 300, HTTPS: true},
	{Host: "static.shop.test", Dir: "/d/static", Party: corpus.PartyCDN, TTL: 60, CNAME: "shop.edge.cdn.test", HTTPS: true},
	{Host: "ads.test", Dir: "/d/ads", Party: corpus.PartyThird, TTL: 30},
}}

// blog is a one-origin page, as the papers' pages were.
var blog = corpus.Page{Name: "blog", Host: "blog.test", Origins: []corpus.Origin{{Host: "blog.test", Dir: "/d/blog", Party: corpus.PartyFirst, TTL: 300, HTTPS: true}}}

func ipOf(host string) string {
	return map[string]string{"server": "10.0.0.1", "origin": "10.0.0.2", "cdn": "10.0.0.3", "third": "10.0.0.4"}[host]
}

// TestPlacementHosts: a multi-origin page's parties go to their hosts,
// a one-origin page stays on "server", whatever its party; the hosts
// pages need come sorted, once each.
func TestPlacementHosts(t *testing.T) {
	require.Equal(t, "server", DefaultPlacement.HostOf(blog, blog.Origins[0]))
	require.Equal(t, "origin", DefaultPlacement.HostOf(shop, shop.Origins[0]))
	require.Equal(t, "cdn", DefaultPlacement.HostOf(shop, shop.Origins[1]))
	require.Equal(t, "third", DefaultPlacement.HostOf(shop, shop.Origins[2]))
	require.Equal(t, []string{"cdn", "origin", "third"}, DefaultPlacement.Hosts([]corpus.Page{blog, shop, shop}))
	require.Equal(t, []string{"cdn"}, CDNPlacement.Hosts([]corpus.Page{shop}))
	require.Empty(t, CDNPlacement.Hosts([]corpus.Page{blog}))
	for name, pl := range Placements {
		require.Equal(t, name, pl.Name)
		for _, h := range pl.Host {
			require.Contains(t, pl.Distance, h, "%s: every host has a distance", name)
		}
	}
}

// TestPageServersAnswerForEveryOrigin: "server" runs the DNS transports
// and answers for every origin, once even when two pages share it: an
// alias through its CNAME, the address of the host serving it with the
// origin's TTL, an HTTPS record where the origin publishes one (on a
// one-origin page only when asked); each host serves its origins, with
// a certificate per name unless its placement shares one.
func TestPageServersAnswerForEveryOrigin(t *testing.T) {
	cfgs := PageServers(ipOf, []corpus.Page{blog, shop, shop}, false, DefaultPlacement)
	require.Len(t, cfgs, 4)
	dns := cfgs["server"]
	require.Equal(t, "10.0.0.1:53", dns.Listen.UDP)
	require.Equal(t, "10.0.0.1:853", dns.Listen.DoQ)
	require.Equal(t, []string{
		"blog.test. 300 IN A 10.0.0.1",
		"shop.test. 300 IN A 10.0.0.2",
		"shop.test. 300 IN HTTPS 1 . alpn=h3,h2 ipv4hint=10.0.0.2",
		"static.shop.test. 300 IN CNAME shop.edge.cdn.test.",
		"shop.edge.cdn.test. 60 IN A 10.0.0.3",
		"shop.edge.cdn.test. 60 IN HTTPS 1 . alpn=h3,h2 ipv4hint=10.0.0.3",
		"ads.test. 30 IN A 10.0.0.4",
	}, dns.Answers.Static, "the papers' one-origin page has no HTTPS record unless asked")
	require.Equal(t, map[string]string{"blog.test": "/d/blog"}, dns.Web.Roots)
	require.False(t, dns.TLS.CertPerName)

	third := cfgs["third"]
	require.Equal(t, "10.0.0.4:443", third.Listen.Web)
	require.Empty(t, third.Listen.UDP, "only server answers DNS")
	require.Equal(t, map[string]string{"ads.test": "/d/ads"}, third.Web.Roots)
	require.Equal(t, []string{"10.0.0.4", "localhost", "ads.test"}, third.TLS.Names)
	require.True(t, third.TLS.CertPerName, "independent sites: a certificate per origin")

	withHTTPS := PageServers(ipOf, []corpus.Page{blog}, true, DefaultPlacement)["server"]
	require.Contains(t, withHTTPS.Answers.Static, "blog.test. 300 IN HTTPS 1 . alpn=h3,h2 ipv4hint=10.0.0.1")

	cdn := PageServers(ipOf, []corpus.Page{shop}, false, CDNPlacement)
	require.Len(t, cdn, 2)
	require.False(t, cdn["cdn"].TLS.CertPerName, "one certificate for the CDN's origins")
	names := cdn["cdn"].TLS.Names
	slices.Sort(names)
	require.Equal(t, []string{"10.0.0.3", "ads.test", "localhost", "shop.test", "static.shop.test"}, names)
}

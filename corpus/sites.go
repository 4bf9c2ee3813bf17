package corpus

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/corpus/internal/pngtext"
)

// Origin is one host a page loads from, and how the DNS publishes it.
type Origin struct {
	Host  string
	Dir   string // its files, once extracted
	Party string // PartyFirst, PartyCDN or PartyThird
	// TTL of its address records, s.
	TTL uint32
	// CNAME, if set, is the name Host is an alias of, as a CDN customer's
	// host is (static.shop.example CNAME shop.edge.cdn.example); the
	// address records are the alias target's.
	CNAME string
	// HTTPS: the origin publishes an HTTPS record (RFC 9460).
	HTTPS bool
}

// The parties of an origin: the page's own, a CDN shared by many sites,
// or a third party (analytics, ads, consent, widgets).
const (
	PartyFirst = "first"
	PartyCDN   = "cdn"
	PartyThird = "third"
)

// SiteSize names a multi-origin page of the corpus and its shape.
type SiteSize struct {
	Name     string
	Origins  int // hosts the page loads from, the first party's included
	Requests int // resources, the document included
	KB       int // bytes on the wire, in kB, the document included
}

// Sites are the corpus' multi-origin pages, whose shapes follow the HTTP
// Archive's Web Almanac 2024 (Page Weight chapter: the median desktop page
// makes 71 requests and weighs 2,652 kB: images 1,054 kB, JavaScript 613,
// fonts 131, CSS 78, HTML 18; Third Parties chapter: 92 % of pages load a
// third party, whose scripts load further ones, the median inclusion
// chain 3.4 deep), and the DoH-cost paper's Fig. 1 (half the Alexa top
// 100k pages need 20 or more DNS queries). o20 is the median page; o1
// holds o20's resources on its one origin, for comparison with the same
// bytes; o5, o30 and o45 go from a small site to a heavily tagged one.
var Sites = []SiteSize{
	{"o1", 1, 70, 2650},
	{"o5", 5, 35, 1300},
	{"o20", 20, 70, 2650},
	{"o30", 30, 100, 3300},
	{"o45", 45, 140, 4200},
}

// Shares of the bytes and requests per resource type (Web Almanac 2024,
// median desktop page); what the types do not fill is pixels and JSON.
var (
	byteShare    = map[string]float64{"img": 0.556, "js": 0.324, "font": 0.069, "css": 0.041}
	requestShare = map[string]float64{"img": 0.25, "js": 0.34, "font": 0.06, "css": 0.08}
)

// thirdParties are the third-party hosts, in the order pages take them;
// every page with k third parties uses the first k, so the hosts are
// shared between pages as on the web.
var thirdParties = []string{
	"tags.tagmanager", "collect.analytics", "consent.cmp", "ads.adserver", "sync.adexchange",
	"pixel.social", "widget.chat", "rum.perf", "cdn.abtest", "img.video", "api.reviews",
	"sync.dsp1", "sync.dsp2", "sync.dsp3", "match.ssp1", "match.ssp2", "beacon.metrics", "js.payments",
	"static.captcha", "embed.maps", "heat.sessionrec", "push.notify", "fonts.icons", "cdn.jsdelivr3p",
	"px.retarget", "sb.scorecard", "id.identity", "ad.doubleverify", "tr.affiliate", "cdn.personalize",
	"api.recommend", "log.errors", "sdk.social2", "cdn.search", "ping.uptime", "s.survey", "media.podcast",
	"live.stream", "cdn.cookiebar", "wx.weather", "fx.currency", "cdn.translate", "ads.native", "t.linkshort",
}

// The shared CDN hosts, in the order pages take them.
var cdnHosts = []string{"cdnjs.cdn", "fonts.cdn", "fontfiles.cdn", "img.cdn"}

// resource is one generated file: where it lives and what refers to it.
type resource struct {
	host, path, kind string
	size             int
	parent           int  // index of the resource that loads it; -1 for the document
	async            bool // a third party's script tag
}

func (r resource) url() string { return "https://" + r.host + r.path }

// siteHost is name under the corpus' domain.
func siteHost(name string) string { return name + "." + Domain }

// generateSite writes one multi-origin page's files under dir/HOST/ and
// returns its origins, the first party's first. The same size always
// gives the same bytes.
func generateSite(dir string, s SiteSize) ([]Origin, error) {
	rng := rand.New(rand.NewPCG(uint64(s.Origins)*1000+uint64(s.Requests), 18))
	first := siteHost("www." + s.Name)
	hosts := []Origin{{Host: first, Party: PartyFirst, TTL: 300, HTTPS: true}}
	if s.Origins >= 2 {
		// First-party static files on a CDN, behind a CNAME, with a CDN's
		// short address TTL.
		hosts = append(hosts, Origin{Host: siteHost("static." + s.Name), Party: PartyCDN, TTL: 60, HTTPS: true,
			CNAME: siteHost(s.Name + ".edge.cdn")})
	}
	for _, h := range cdnHosts {
		if len(hosts) >= s.Origins || len(hosts) >= 2+len(cdnHosts) || (s.Origins < 8 && len(hosts) >= 3) {
			break
		}
		hosts = append(hosts, Origin{Host: siteHost(h), Party: PartyCDN, TTL: 3600, HTTPS: true})
	}
	for _, h := range thirdParties {
		if len(hosts) >= s.Origins {
			break
		}
		// About half the third parties publish HTTPS records, with a TTL
		// between a minute and an hour.
		hosts = append(hosts, Origin{Host: siteHost(h), Party: PartyThird, TTL: []uint32{60, 300, 3600}[len(hosts)%3], HTTPS: len(hosts)%2 == 0})
	}
	if len(hosts) < s.Origins {
		return nil, fmt.Errorf("site %s: %d origins, the generator has %d", s.Name, s.Origins, len(hosts))
	}
	res := planResources(rng, s, hosts)
	if err := writeResources(rng, dir, s, res); err != nil {
		return nil, err
	}
	for i := range hosts {
		hosts[i].Dir = filepath.Join(dir, hosts[i].Host)
		if err := os.MkdirAll(hosts[i].Dir, 0o755); err != nil {
			return nil, err
		}
	}
	return hosts, nil
}

// planResources lays the page's resources out over its hosts and decides
// who loads whom: the document loads style sheets, scripts and about half
// the images; the app script the other images; the tag manager the third
// parties the document does not load; third-party scripts their pixels
// and, one level further, sync pixels of other third parties.
func planResources(rng *rand.Rand, s SiteSize, hosts []Origin) []resource {
	of := func(party string) []string {
		var out []string
		for _, h := range hosts {
			if h.Party == party {
				out = append(out, h.Host)
			}
		}
		return out
	}
	first := hosts[0].Host
	static, cdn, third := first, of(PartyCDN), of(PartyThird)
	if len(cdn) > 0 {
		static = cdn[0]
	}
	pick := func(name string) string { // a shared CDN host, or the static one
		if slices.Contains(cdn, siteHost(name)) {
			return siteHost(name)
		}
		return static
	}
	if s.Origins == 1 {
		third = nil
	}
	count := func(kind string) int { return max(1, int(requestShare[kind]*float64(s.Requests)+0.5)) }
	res := []resource{{host: first, path: "/", kind: "html", parent: -1}}
	add := func(host, kind string, parent int) int {
		n := 0
		for _, r := range res {
			if r.kind == kind {
				n++
			}
		}
		ext := map[string]string{"js": "js", "css": "css", "img": "png", "font": "woff2", "pixel": "gif", "json": "json"}[kind]
		res = append(res, resource{host: host, path: fmt.Sprintf("/%s/%s%d.%s", s.Name, kind, n, ext), kind: kind, parent: parent,
			async: slices.Contains(third, host)})
		return len(res) - 1
	}
	// Style sheets: the site's own, then a font service's.
	css := []int{add(first, "css", 0)}
	fontCSS := css[0]
	if f := pick("fonts.cdn"); f != static {
		fontCSS = add(f, "css", 0)
		css = append(css, fontCSS)
	}
	for len(css) < count("css") {
		css = append(css, add(static, "css", 0))
	}
	for range count("font") {
		add(pick("fontfiles.cdn"), "font", fontCSS)
	}
	// Scripts: a library from a public CDN and the app in the head.
	add(pick("cdnjs.cdn"), "js", 0)
	app := add(static, "js", 0)
	// Third parties: a third from the document, the rest from the tag
	// manager (itself loaded by the document), each a script that loads a
	// pixel; every third one also syncs with the next third party.
	var thirdScripts []int
	if len(third) > 0 {
		tm := add(third[0], "js", 0)
		thirdScripts = append(thirdScripts, tm)
		for i, h := range third[1:] {
			parent := tm
			if i%3 == 0 {
				parent = 0
			}
			thirdScripts = append(thirdScripts, add(h, "js", parent))
		}
	}
	jsLeft := count("js") - len(thirdScripts) - 2
	for i := 0; i < jsLeft; i++ { // more of the site's own scripts
		add(static, "js", 0)
	}
	// Images: half in the document, half inserted by the app.
	imgHost := pick("img.cdn")
	for i := range count("img") {
		host, parent := imgHost, 0
		if i%4 == 3 {
			host = first
		}
		if i%2 == 1 {
			parent = app
		}
		add(host, "img", parent)
	}
	// Pixels and data fill the remaining requests: each third-party
	// script sends a beacon to its host, every third syncs with the
	// next third party (an inclusion chain one step longer), and the app
	// fetches JSON from the first party.
	for i := 0; len(res) < s.Requests; i++ {
		switch {
		case len(thirdScripts) > 0 && i < 2*len(thirdScripts):
			k := i % len(thirdScripts)
			host := res[thirdScripts[k]].host
			if i >= len(thirdScripts) {
				if k%3 != 0 {
					continue
				}
				host = third[(k+1)%len(third)]
			}
			add(host, "pixel", thirdScripts[k])
		default:
			add(first, "json", app)
		}
	}
	// Sizes: each type's share of the bytes, split evenly with a jitter
	// of a third, the document 18 kB.
	total := s.KB * 1000
	res[0].size = 18000
	kinds := map[string][]int{}
	for i, r := range res[1:] {
		kinds[r.kind] = append(kinds[r.kind], i+1)
	}
	for _, kind := range slices.Sorted(maps.Keys(kinds)) { // in order: the sizes draw on rng
		idx := kinds[kind]
		share, ok := byteShare[kind]
		if !ok {
			for _, i := range idx {
				res[i].size = 43 + rng.IntN(400) // a GIF pixel, a small JSON
			}
			continue
		}
		each := share * float64(total-18000) / float64(len(idx))
		for _, i := range idx {
			res[i].size = max(200, int(each*(2.0/3+rng.Float64()*2/3)))
		}
	}
	return res
}

// writeResources writes every resource: scripts that load their
// children, style sheets that name their fonts, the document that links
// the rest; each padded to its size.
func writeResources(rng *rand.Rand, dir string, s SiteSize, res []resource) error {
	children := map[int][]int{}
	for i, r := range res {
		if r.parent >= 0 {
			children[r.parent] = append(children[r.parent], i)
		}
	}
	filler := func(n int) string { // high-entropy text: gzip shrinks it by a quarter, as it does minified code
		b := make([]byte, n*3/4+3)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return base64.StdEncoding.EncodeToString(b)[:n]
	}
	pad := func(body string, n int, open, close string) []byte {
		if fill := n - len(body) - len(open) - len(close); fill > 0 {
			body += open + filler(fill) + close
		}
		return []byte(body)
	}
	for i, r := range res {
		var body []byte
		switch r.kind {
		case "html":
			body = []byte(siteDocument(s, res, children[i], filler))
		case "js":
			var b strings.Builder
			b.WriteString("(function(){var d=document;function s(u){var e=d.createElement('script');e.src=u;e.async=true;d.head.appendChild(e)}" +
				"function i(u,w){var e=new Image();e.src=u;e.width=w;e.height=w;e.alt='';" +
				"if(d.body)d.body.appendChild(e);else d.addEventListener('DOMContentLoaded',function(){d.body.appendChild(e)})}" +
				"function j(u){fetch(u).then(function(r){return r.text()})}\n")
			for _, c := range children[i] {
				switch res[c].kind {
				case "js":
					fmt.Fprintf(&b, "s('%s');", res[c].url())
				case "img":
					fmt.Fprintf(&b, "i('%s',120);", res[c].url())
				case "pixel":
					fmt.Fprintf(&b, "i('%s',1);", res[c].url())
				case "json":
					fmt.Fprintf(&b, "j('%s');", res[c].url())
				}
			}
			b.WriteString("\n})();\n")
			body = pad(b.String(), r.size, "var _='", "';\n")
		case "css":
			var b strings.Builder
			for k, c := range children[i] {
				fmt.Fprintf(&b, "@font-face{font-family:F%d;src:url(%s) format('woff2');font-display:swap}\n.f%d{font-family:F%d,sans-serif}\n", k, res[c].url(), k, k)
			}
			b.WriteString("body{margin:0;font:16px/1.5 system-ui,sans-serif}img{max-width:100%}\n")
			body = pad(b.String(), r.size, "/*", "*/\n")
		case "img":
			body = pngPadded(8, 8, r.size, rng)
		case "pixel":
			body = pixelGIF(r.size)
		case "font", "json":
			body = pad("", r.size, "", "")
			if r.kind == "json" {
				body = pad(`{"items":[],"pad":"`, r.size, "", `"}`)
			}
		}
		p := filepath.Join(dir, r.host, strings.TrimSuffix(r.path, "/"))
		if r.path == "/" {
			p = filepath.Join(dir, r.host, "index.html")
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// siteDocument is the page's HTML: style sheets and the head's scripts,
// text in each web font, the document's images and third-party tags.
func siteDocument(s SiteSize, res []resource, kids []int, filler func(int) string) string {
	var head, body strings.Builder
	fonts := 0
	for _, r := range res {
		if r.kind == "font" {
			fonts++
		}
	}
	for _, c := range kids {
		r := res[c]
		switch r.kind {
		case "css":
			fmt.Fprintf(&head, "<link rel=\"stylesheet\" href=\"%s\">\n", r.url())
		case "js":
			if r.async {
				fmt.Fprintf(&head, "<script async src=\"%s\"></script>\n", r.url())
			} else {
				fmt.Fprintf(&head, "<script src=\"%s\"></script>\n", r.url())
			}
		case "img":
			fmt.Fprintf(&body, "<img src=\"%s\" width=\"240\" height=\"160\" alt=\"\">\n", r.url())
		}
	}
	var text strings.Builder
	for k := range fonts {
		fmt.Fprintf(&text, "<p class=\"f%d\">%s</p>\n", k, filler(120))
	}
	doc := fmt.Sprintf("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s: a page over %d origins</title>\n%s</head><body>\n<h1>%s</h1>\n%s%s",
		s.Name, s.Origins, head.String(), s.Name, text.String(), body.String())
	const tail = "</body></html>\n"
	if fill := 18000 - len(doc) - len(tail) - 9; fill > 0 {
		doc += "<!--" + filler(fill) + "-->\n"
	}
	return doc + tail
}

// pngPadded is a valid w×h PNG padded to size octets with a tEXt chunk.
func pngPadded(w, h, size int, rng *rand.Rand) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(rng.Uint32()), uint8(x * 255 / w), uint8(y * 255 / h), 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	b := buf.Bytes()
	var text []byte
	for len(text)+len("Comment\x00") < size-len(b)-12 {
		text = append(text, byte('a'+rng.IntN(26)))
	}
	return pngtext.Pad(b, text)
}

// pixelGIF is a 1×1 GIF, padded with a comment extension to size octets
// where size allows.
func pixelGIF(size int) []byte {
	head := []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff")
	img := []byte("\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00")
	out := append([]byte{}, head...)
	for left := size - len(head) - len(img) - 1 - 3; left > 0; {
		n := min(left, 255)
		out = append(out, 0x21, 0xfe, byte(n))
		out = append(out, bytes.Repeat([]byte{'x'}, n)...)
		out = append(out, 0)
		left -= n + 4
	}
	out = append(out, img...)
	return append(out, 0x3b)
}

// Command gencorpus writes doxlab's page corpus (corpus/corpus): three pages
// in the cross-layer paper's categories, each served from one host, with
// the sizes of the paper's snapshots where it gives them. The output is
// committed; run `go generate ./web` after changing this file. It is
// deterministic, so regenerating changes nothing unless the code did.
package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/doxlab/doxlab/corpus/internal/pngtext"
)

var rng = rand.New(rand.NewPCG(2022, 6))

var words = strings.Fields(`the of and to in is was for on that with as by at from his her an were which are this be has had its
network protocol server client query answer resolver browser page load time connection encrypted transport layer handshake
history city river century university people language music science government village island museum station region
art film war world system family population culture north south east west history early known modern study`)

func text(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// title capitalises each word of lower-case ASCII text (what
// strings.Title did here, without its deprecated Unicode rules).
func title(s string) string {
	b := []byte(s)
	for i, c := range b {
		if (i == 0 || b[i-1] == ' ') && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func ident() string {
	const a = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$"
	var b [6]byte
	for i := range b {
		b[i] = a[rng.IntN(len(a))]
	}
	return string(b[:])
}

// pad grows s to exactly n octets with an HTML or JS comment before the
// end; the paper's sizes are kept to the octet.
func pad(s string, n int, open, close string) string {
	if len(s)+len(open)+len(close) > n {
		log.Fatalf("content already %d octets, want %d", len(s), n)
	}
	fill := n - len(s) - len(open) - len(close)
	return s + open + text(fill) + close
}

// pngOf draws a w×h image and pads the file to exactly size octets with a
// tEXt chunk, so the transfer is the paper's size while staying a valid PNG.
func pngOf(w, h, size int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := uint8(r.IntN(8) * 32) // some entropy, like a logo's anti-aliasing
			img.Set(x, y, color.NRGBA{v, uint8(x * 255 / w), uint8(y * 255 / h), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		log.Fatal(err)
	}
	b := buf.Bytes()
	need := size - len(b) - pngtext.Overhead
	if need < 0 {
		log.Fatalf("png %dx%d is %d octets, more than %d", w, h, len(b), size)
	}
	return pngtext.Pad(b, []byte(text(need)))
}

func write(dir, name string, b []byte) {
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		log.Fatal(err)
	}
}

// example is a single HTML document, like example.org.
func example(dir string) {
	write(dir, "index.html", []byte(`<!doctype html>
<html>
<head>
    <title>Example Domain</title>
    <meta charset="utf-8" />
    <meta http-equiv="Content-type" content="text/html; charset=utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <style type="text/css">
    body { background-color: #f0f0f2; margin: 0; padding: 0;
        font-family: -apple-system, system-ui, BlinkMacSystemFont, "Segoe UI", "Open Sans", "Helvetica Neue", Helvetica, Arial, sans-serif; }
    div { width: 600px; margin: 5em auto; padding: 2em; background-color: #fdfdff;
        border-radius: 0.5em; box-shadow: 2px 3px 7px 2px rgba(0,0,0,0.02); }
    a:link, a:visited { color: #38488f; text-decoration: none; }
    @media (max-width: 700px) { div { margin: 0 auto; width: auto; } }
    </style>
</head>
<body>
<div>
    <h1>Example Domain</h1>
    <p>This domain is for use in illustrative examples in documents. You may use this
    domain in literature without prior coordination or asking for permission.</p>
    <p><a href="https://www.iana.org/domains/example">More information...</a></p>
</div>
</body>
</html>
`))
}

// wiki is HTML, one script, two PNG logos and an SVG sprite, with the
// paper's sizes for its Wikipedia snapshot.
func wiki(dir string) {
	js := `document.addEventListener('DOMContentLoaded',function(){var i=document.getElementById('searchInput');` +
		`if(i){i.addEventListener('focus',function(){document.body.classList.add('search-focused')})}` +
		`var l=document.querySelectorAll('.central-featured-lang');for(var k=0;k<l.length;k++){l[k].title=l[k].textContent.trim()}});`
	write(dir, "portal/wikipedia.org/assets/js/index.js", []byte(pad(js, 614, "/*", "*/")))
	write(dir, "portal/wikipedia.org/assets/img/Wikipedia-logo-v2.png", pngOf(100, 100, 15857, 1))
	write(dir, "portal/wikipedia.org/assets/img/Wikipedia_wordmark.png", pngOf(24, 24, 2039, 2))
	var svg strings.Builder
	svg.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="20" height="20" viewBox="0 0 20 20">`)
	for i := 0; svg.Len() < 16500; i++ {
		fmt.Fprintf(&svg, `<symbol id="i%d" viewBox="0 0 20 20"><path d="M%d %dh%dv%dH%dz m%d %d l%d %d"/></symbol>`, i,
			rng.IntN(20), rng.IntN(20), rng.IntN(20), rng.IntN(20), rng.IntN(20), rng.IntN(9), rng.IntN(9), rng.IntN(9), rng.IntN(9))
	}
	write(dir, "portal/wikipedia.org/assets/img/sprite.svg", []byte(pad(svg.String(), 17229-len("</svg>"), "<!--", "-->")+"</svg>"))

	var h strings.Builder
	h.WriteString(`<!DOCTYPE html>
<html lang="en" class="no-js">
<head>
<meta charset="utf-8">
<title>Wikipedia</title>
<meta name="description" content="Wikipedia is a free online encyclopedia, created and edited by volunteers around the world.">
<meta name="viewport" content="initial-scale=1,user-scalable=yes">
<style>
body{margin:0;font-family:sans-serif;color:#202122}.central-textlogo{margin:1em auto;text-align:center}
.central-featured{position:relative;height:325px;width:100%;max-width:55em;margin:0 auto;text-align:center}
.central-featured-lang{position:absolute;width:11em}.lang1{top:0;right:60%}.lang2{top:0;left:60%}
.lang3{top:20%;right:70%}.lang4{top:20%;left:70%}.search-container{text-align:center;margin:1em}
.sprite{display:inline-block;width:20px;height:20px;background:url(portal/wikipedia.org/assets/img/sprite.svg) no-repeat}
.other-projects{max-width:65em;margin:2em auto;display:flex;flex-wrap:wrap}.other-project{width:33%;padding:.5em 0}
</style>
</head>
<body id="www-wikipedia-org">
<div class="central-textlogo">
<img class="central-featured-logo" src="portal/wikipedia.org/assets/img/Wikipedia-logo-v2.png" width="200" height="183" alt="">
<h1 class="central-textlogo-wrapper"><img src="portal/wikipedia.org/assets/img/Wikipedia_wordmark.png" width="160" height="25" alt="Wikipedia"><strong class="jsl10n">The Free Encyclopedia</strong></h1>
</div>
<div class="central-featured" role="navigation" aria-label="Top languages">
`)
	langs := []string{"English", "日本語", "Español", "Deutsch", "Русский", "Français", "Italiano", "中文", "Português", "Polski"}
	for i, l := range langs {
		fmt.Fprintf(&h, `<div class="central-featured-lang lang%d" lang="x%d"><a href="//x%d.wikipedia.org/" title="%s"><strong>%s</strong><small><bdi dir="ltr">%d 000+</bdi> <span>articles</span></small></a></div>
`, i+1, i, i, l, l, 6000-i*400)
	}
	h.WriteString(`</div>
<div class="search-container"><form class="pure-form" id="search-form" action="//www.wikipedia.org/search-redirect.php"><input id="searchInput" name="search" type="search" size="20" autofocus="autofocus" accesskey="F" dir="auto" autocomplete="off"><i class="sprite"></i><button class="pure-button" type="submit">Search</button></form></div>
<div class="other-projects">
`)
	for h.Len() < 16800 {
		fmt.Fprintf(&h, `<div class="other-project"><a class="other-project-link" href="//%s.org/"><div class="other-project-icon"><i class="sprite"></i></div><div class="other-project-text"><span class="other-project-title">%s</span><span class="other-project-tagline">%s</span></div></a></div>
`, ident(), title(text(9)), text(30))
	}
	tail := `</div>
<script src="portal/wikipedia.org/assets/js/index.js"></script>
</body>
</html>
`
	write(dir, "index.html", []byte(pad(h.String(), 18252-len(tail), "<!--", "-->")+tail))
}

// jsBundle is a syntactically valid script of about n octets that defines
// many small modules and runs a share of them, so parsing and executing it
// costs the browser time as a framework bundle does.
func jsBundle(name string, n int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "/*! %s */\n(function(){\"use strict\";var m={},r=[];\n", name)
	for i := 0; b.Len() < n-400; i++ {
		fmt.Fprintf(&b, "m[%q]=function(%s,%s){var %s=%q;for(var i=0;i<%d;i++){%s+=String.fromCharCode(65+(i+%s.length)%%26)}return %s.length+(%s|0)};\n",
			ident(), "a", "b", "s", text(20+rng.IntN(40)), 5+rng.IntN(20), "s", "a", "s", "b")
		if i%3 == 0 {
			fmt.Fprintf(&b, "r.push(%q);\n", ident())
		}
	}
	b.WriteString("var t=0;for(var k in m){t+=m[k](\"x\",1)}window.__bundles=(window.__bundles||0)+1;window.__work=(window.__work||0)+t;})();\n")
	return []byte(b.String())
}

// insta is HTML, seven scripts (one React-sized), two style sheets,
// images that a script loads and a cookie banner a script builds.
func insta(dir string) {
	write(dir, "static/js/vendor-react.js", jsBundle("vendor-react (react + react-dom, production)", 131000))
	write(dir, "static/js/polyfills.js", jsBundle("polyfills", 9000))
	write(dir, "static/js/i18n.js", jsBundle("i18n", 14000))
	write(dir, "static/js/analytics.js", jsBundle("analytics (no network)", 6000))
	write(dir, "static/js/app.js", jsBundle("app", 42000))
	write(dir, "static/js/feed.js", []byte(`/*! feed: images loaded by script */
(function(){function load(){var f=document.getElementById('feed');for(var i=1;i<=6;i++){var a=document.createElement('article');
var img=new Image();img.width=300;img.height=300;img.alt='post '+i;img.src='static/img/post'+i+'.png';a.appendChild(img);
var p=document.createElement('p');p.textContent='Liked by '+(i*137)+' people';a.appendChild(p);f.appendChild(a)}}
if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',load)}else{load()}})();
`))
	write(dir, "static/js/consent.js", []byte(`/*! consent: the cookie banner, built by script */
(function(){function show(){if(document.cookie.indexOf('consent=')>=0)return;var d=document.createElement('div');d.className='cookie-banner';
d.innerHTML='<h2>Allow the use of cookies on this browser?</h2><p>We use cookies to help provide, personalise and improve content, to measure ads and to provide a safer experience.</p>';
['Allow essential and optional cookies','Decline optional cookies'].forEach(function(t,i){var b=document.createElement('button');b.textContent=t;
b.onclick=function(){document.cookie='consent='+(i?'essential':'all')+'; path=/; max-age=31536000';d.remove()};d.appendChild(b)});
document.body.appendChild(d);document.cookie='csrftoken=`+ident()+ident()+`; path=/';document.cookie='mid=`+ident()+`; path=/'}
if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',show)}else{show()}})();
`))
	for i := 1; i <= 6; i++ {
		write(dir, fmt.Sprintf("static/img/post%d.png", i), pngOf(64, 64, 14000+i*1500, uint64(10+i)))
	}
	css := func(n int) []byte {
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, ".%s{margin:%dpx;padding:%dpx %dpx;color:#%06x;display:flex}\n", ident(), rng.IntN(20), rng.IntN(20), rng.IntN(20), rng.IntN(1<<24))
		}
		return []byte(b.String())
	}
	main := append([]byte("body{margin:0;font-family:-apple-system,system-ui,sans-serif;background:#fafafa}#feed{max-width:614px;margin:0 auto}article{background:#fff;border:1px solid #dbdbdb;margin:12px 0}article img{width:100%;height:auto}\n"), css(24000)...)
	write(dir, "static/css/main.css", main)
	write(dir, "static/css/banner.css", append([]byte(".cookie-banner{position:fixed;bottom:0;left:0;right:0;background:#fff;padding:16px;box-shadow:0 -2px 8px rgba(0,0,0,.2)}.cookie-banner button{margin:4px;padding:8px 16px;background:#0095f6;color:#fff;border:0;border-radius:4px}\n"), css(3000)...))
	var h strings.Builder
	h.WriteString(`<!DOCTYPE html>
<html lang="en" class="no-js not-logged-in">
<head>
<meta charset="utf-8">
<title>Instagram</title>
<meta name="viewport" content="width=device-width, initial-scale=1, minimum-scale=1, maximum-scale=1, viewport-fit=cover">
<link rel="stylesheet" href="static/css/main.css">
<link rel="stylesheet" href="static/css/banner.css">
<script src="static/js/polyfills.js"></script>
<script src="static/js/vendor-react.js"></script>
<script src="static/js/i18n.js"></script>
</head>
<body>
<header><h1>Instagram</h1></header>
<main><div id="feed"></div></main>
<script type="application/json" id="shared-data">{"config":{"csrf_token":"`)
	h.WriteString(ident() + ident())
	h.WriteString(`","viewer":null},"entry_data":{"LandingPage":[{"captions":[`)
	for i := 0; h.Len() < 38000; i++ {
		if i > 0 {
			h.WriteString(",")
		}
		fmt.Fprintf(&h, "%q", text(60+rng.IntN(60)))
	}
	h.WriteString(`]}]}}</script>
<script src="static/js/app.js"></script>
<script src="static/js/feed.js" async></script>
<script src="static/js/analytics.js" defer></script>
<script src="static/js/consent.js" defer></script>
</body>
</html>
`)
	write(dir, "index.html", []byte(h.String()))
}

func main() {
	out := "corpus"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := os.RemoveAll(out); err != nil {
		log.Fatal(err)
	}
	example(filepath.Join(out, "example"))
	wiki(filepath.Join(out, "wiki"))
	insta(filepath.Join(out, "insta"))
}

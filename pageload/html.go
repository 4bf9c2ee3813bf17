package pageload

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// FromHTML is a graph for a page no browser was traced on: the document
// and what its HTML names (style sheets, scripts, images, icons,
// preloads), each discovered where the parser meets it, with no compute
// gap. It misses what scripts and style sheets fetch, and the browser's
// own time; a captured graph has both.
func FromHTML(page string, body []byte) (*Graph, error) {
	base, err := url.Parse(page)
	if err != nil {
		return nil, err
	}
	g := &Graph{Page: page, Resources: []Resource{{URL: page, Type: "Document", Parent: -1, Size: int64(len(body))}}}
	seen := map[string]bool{page: true}
	z := html.NewTokenizer(bytes.NewReader(body))
	var offset int64
	for {
		tt := z.Next()
		offset += int64(len(z.Raw()))
		if tt == html.ErrorToken {
			if errors.Is(z.Err(), io.EOF) {
				break
			}
			return nil, z.Err()
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		t := z.Token()
		attr := map[string]string{}
		for _, a := range t.Attr {
			attr[a.Key] = a.Val
		}
		var ref, typ string
		switch t.Data {
		case "script":
			ref, typ = attr["src"], "Script"
		case "img":
			ref, typ = attr["src"], "Image"
		case "link":
			switch rel := strings.ToLower(attr["rel"]); {
			case rel == "stylesheet":
				ref, typ = attr["href"], "Stylesheet"
			case strings.Contains(rel, "icon"):
				ref, typ = attr["href"], "Image"
			case rel == "preload":
				ref, typ = attr["href"], "Other"
			}
		}
		if ref == "" || strings.HasPrefix(ref, "data:") {
			continue
		}
		u, err := base.Parse(ref)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			continue
		}
		u.Fragment = ""
		if seen[u.String()] {
			continue
		}
		seen[u.String()] = true
		g.Resources = append(g.Resources, Resource{URL: u.String(), Type: typ, Parent: 0, AfterBytes: min(offset, int64(len(body)))})
	}
	return g, g.Check()
}

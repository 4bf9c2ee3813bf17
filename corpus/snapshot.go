package corpus

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// mirrorHosts lists the host directories of a multi-host mirror and the
// one whose directory holds index.html: the page's own.
func mirrorHosts(dir string) (hosts []string, first string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	var firsts []string
	for _, e := range entries {
		if !e.IsDir() || !strings.Contains(e.Name(), ".") {
			continue // a host's directory is named after the host
		}
		hosts = append(hosts, e.Name())
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "index.html")); err == nil {
			firsts = append(firsts, e.Name())
		}
	}
	switch {
	case len(hosts) == 0:
		return nil, "", fmt.Errorf("no index.html, and no host directories (as wget -mpEk -H makes)")
	case len(firsts) == 0:
		return nil, "", fmt.Errorf("no host directory holds an index.html: which host's page is it?")
	case len(firsts) > 1:
		return nil, "", fmt.Errorf("several host directories hold an index.html (%s): give the page's own host directory alone, or remove the others' index.html", strings.Join(firsts, ", "))
	}
	slices.Sort(hosts)
	return hosts, firsts[0], nil
}

// linkRules find the link values wget -k rewrites, in HTML and CSS: an
// attribute naming one URL (quoted either way, or not at all), one
// naming a list of image candidates (srcset: "URL 2x, URL 640w"), CSS's
// url() and @import's string. Each group 2 is the value; fix rewrites it.
var linkRules = []struct {
	re   *regexp.Regexp
	list bool // a srcset's candidates
}{
	{re: regexp.MustCompile(`(\b(?:src|href|poster|data-src)\s*=\s*")([^"]*)(")`)},
	{re: regexp.MustCompile(`(\b(?:src|href|poster|data-src)\s*=\s*')([^']*)(')`)},
	{re: regexp.MustCompile(`(\b(?:src|href|poster|data-src)\s*=)([^\s"'=<>` + "`" + `]+)()`)},
	{re: regexp.MustCompile(`(\b(?:srcset|imagesrcset|data-srcset)\s*=\s*")([^"]*)(")`), list: true},
	{re: regexp.MustCompile(`(\b(?:srcset|imagesrcset|data-srcset)\s*=\s*')([^']*)(')`), list: true},
	{re: regexp.MustCompile(`(url\(\s*["']?)([^"')]+)(["']?\s*\))`)},
	{re: regexp.MustCompile(`(@import\s+["'])([^"']+)(["'])`)},
}

// copyMirror copies the host directories of src to dst, turning relative
// links that climb into another host's directory back into that host's
// absolute URLs in HTML and CSS files.
func copyMirror(src, dst string, hosts []string) error {
	for _, h := range hosts {
		root := filepath.Join(src, h)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			out := filepath.Join(dst, rel)
			if d.IsDir() {
				return os.MkdirAll(out, 0o755)
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".html", ".htm", ".css":
				b = absolutize(b, filepath.ToSlash(rel), hosts)
			}
			return os.WriteFile(out, b, 0o644)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// absolutize rewrites the links of a file at rel (host/path/file) that
// resolve into another host's directory as https://host/path.
func absolutize(b []byte, rel string, hosts []string) []byte {
	self, _, _ := strings.Cut(rel, "/")
	base := path.Dir(rel)
	fix := func(v string) string {
		if v == "" || strings.Contains(v, "://") || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "#") || strings.HasPrefix(v, "data:") || strings.HasPrefix(v, "mailto:") {
			return v
		}
		target := path.Join(base, v)
		host, rest, _ := strings.Cut(target, "/")
		if host == self || !slices.Contains(hosts, host) {
			return v
		}
		return "https://" + host + "/" + rest
	}
	// fixList rewrites each candidate of a srcset: its URL, then its
	// descriptor, the commas and spaces between them kept.
	fixList := func(v string) string {
		parts := strings.Split(v, ",")
		for i, c := range parts {
			lead := len(c) - len(strings.TrimLeft(c, " \t\n"))
			u, desc, _ := strings.Cut(c[lead:], " ")
			if desc != "" || strings.HasSuffix(c[lead:], " ") {
				desc = " " + desc
			}
			parts[i] = c[:lead] + fix(u) + desc
		}
		return strings.Join(parts, ",")
	}
	for _, r := range linkRules {
		b = r.re.ReplaceAllFunc(b, func(m []byte) []byte {
			sub := r.re.FindSubmatch(m)
			v := fix(string(sub[2]))
			if r.list {
				v = fixList(string(sub[2]))
			}
			return []byte(string(sub[1]) + v + string(sub[3]))
		})
	}
	return b
}

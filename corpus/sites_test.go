package corpus

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSites checks the multi-origin pages' shapes: origins, requests and
// bytes as their sizes say, every origin loaded from, the median page
// over 20 hosts.
func TestSites(t *testing.T) {
	dir := t.TempDir()
	pages, err := Extract(dir)
	require.NoError(t, err)
	byName := map[string]Page{}
	for _, p := range pages {
		byName[p.Name] = p
	}
	for _, s := range Sites {
		p, ok := byName[s.Name]
		require.True(t, ok, s.Name)
		require.Len(t, p.Origins, s.Origins, s.Name)
		require.Equal(t, PartyFirst, p.Origins[0].Party)
		require.Equal(t, p.Host, p.Origins[0].Host)
		// Every resource the page names, by host; the bytes on disk.
		files, bytes := 0, 0
		used := map[string]bool{}
		for _, o := range p.Origins {
			filepath.WalkDir(o.Dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(o.Dir, path)
				if rel != "index.html" && !strings.HasPrefix(rel, s.Name+"/") {
					return nil // another page's file on a shared host
				}
				info, _ := d.Info()
				files++
				bytes += int(info.Size())
				used[o.Host] = true
				return nil
			})
		}
		require.Equal(t, s.Requests, files, "%s: one file per request", s.Name)
		require.InDelta(t, float64(s.KB*1000), float64(bytes), 0.1*float64(s.KB*1000), "%s: bytes", s.Name)
		require.Len(t, used, s.Origins, "%s: every origin serves something", s.Name)
	}
	require.GreaterOrEqual(t, len(byName["o20"].Origins), 20, "the median page needs 20 lookups or more")
	var cnames, https int
	for _, o := range byName["o45"].Origins {
		if o.CNAME != "" {
			cnames++
		}
		if o.HTTPS {
			https++
		}
	}
	require.Equal(t, 1, cnames, "the first party's static host is a CDN alias")
	require.Greater(t, https, 10)
	require.Less(t, https, 45, "not every origin publishes an HTTPS record")

	// The document names what it loads; a third party's tag loads more.
	doc, err := os.ReadFile(filepath.Join(byName["o20"].Dir, "index.html"))
	require.NoError(t, err)
	require.Contains(t, string(doc), `<script async src="https://tags.tagmanager.doxlab.test/o20/js`)
	tm, err := filepath.Glob(filepath.Join(dir, "sites", "tags.tagmanager.doxlab.test", "o20", "*.js"))
	require.NoError(t, err)
	require.Len(t, tm, 1)
	b, _ := os.ReadFile(tm[0])
	require.Contains(t, string(b), "s('https://consent.cmp.doxlab.test/o20/js")
}

// TestSitesAreDeterministic: the generator is the corpus, so its output
// must not change unless the generator does. Update the digest with care:
// results measured on the old pages are not comparable with new ones.
func TestSitesAreDeterministic(t *testing.T) {
	digest := func() string {
		dir := t.TempDir()
		_, err := Extract(dir)
		require.NoError(t, err)
		h := sha256.New()
		filepath.WalkDir(filepath.Join(dir, "sites"), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			b, _ := os.ReadFile(path)
			h.Write([]byte(rel))
			h.Write(b)
			return nil
		})
		return hex.EncodeToString(h.Sum(nil))
	}
	const want = "1401a892bb4696c96ec2cb52aa1966ba8d38e8ab54c428dbfb2f0f1541724bf9"
	require.Equal(t, want, digest(), "the multi-origin pages changed")
}

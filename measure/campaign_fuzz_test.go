package measure

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadCampaign: a campaign spec, whatever its octets, is read and
// checked into a campaign or an error, never a panic, and a campaign
// it takes gives its spec and its policy.
func FuzzLoadCampaign(f *testing.F) {
	for _, name := range []string{"campaign.yaml", "campaign-pages.yaml", "campaign-vantages.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("name: x\ntargets: [192.0.2.1]\nrepeat: -1\nevery: 1ns\nrounds: 99999999999\n"))
	f.Add([]byte("name: x\nvantages: [{name: a, targets_file: /dev/null}]\npages: {urls: ['http://[::1]:0/']}\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadCampaign(path)
		if err != nil {
			return
		}
		if _, err := c.Spec(); err != nil {
			return
		}
		_, _ = c.Policy()
		_, _ = c.Blocked()
	})
}

package measure

import (
	"testing"

	"github.com/doxlab/doxlab/internal/testutil"
)

// FuzzLoadCampaign: a campaign spec, whatever its octets, is read and
// checked into a campaign or an error, never a panic, and a campaign
// it takes gives its spec and its policy.
func FuzzLoadCampaign(f *testing.F) {
	testutil.FuzzFile(f, []string{"../examples/campaign.yaml", "../examples/campaign-pages.yaml", "../examples/campaign-vantages.yaml"}, []string{
		"name: x\ntargets: [192.0.2.1]\nrepeat: -1\nevery: 1ns\nrounds: 99999999999\n",
		"name: x\nvantages: [{name: a, targets_file: /dev/null}]\npages: {urls: ['http://[::1]:0/']}\n",
	}, func(t *testing.T, path string) {
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

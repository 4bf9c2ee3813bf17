package web

import (
	"os"
	"testing"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// TestHeldPerCampaignLoad prints what a campaign's page load decoded
// for analysis holds in memory, over the campaign-load results of the
// store DOXLAB_LOADS_STORE names (skipped without one), as
// pages.TestHeldPerLoad does for the testbed's loads: a year's campaign
// is half a million of them. It prints a figure and asserts nothing.
//
//	DOXLAB_LOADS_STORE=/tmp/wildview.db go test -run TestHeldPerCampaignLoad -v ./experiment/web
func TestHeldPerCampaignLoad(t *testing.T) {
	path := os.Getenv("DOXLAB_LOADS_STORE")
	if path == "" {
		t.Skip("DOXLAB_LOADS_STORE names a store with campaign-load results")
	}
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var raws [][]byte
	if err := st.Results(t.Context(), "", campaign.PageLoads, func(_ string, raw []byte) error {
		raws = append(raws, append([]byte(nil), raw...))
		return nil
	}); err != nil || len(raws) == 0 {
		t.Fatalf("no campaign-load results in %s: %v", path, err)
	}
	each := testutil.HeapHeld(20*len(raws), raws, func(i int) any {
		x, err := analysedWild("run", raws[i%len(raws)])
		if err != nil {
			t.Fatal(err)
		}
		return x
	})
	t.Logf("%d campaign loads decoded for analysis hold %.0f octets each", 20*len(raws), each)
}

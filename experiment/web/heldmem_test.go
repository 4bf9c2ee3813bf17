package web

import (
	"os"
	"runtime"
	"testing"

	"github.com/doxlab/doxlab/campaign"
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
	runtime.GC() // twice: the second frees what sync.Pools kept
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var held []*wildLoad
	for range 20 {
		for _, r := range raws {
			x, err := analysedWild("run", r)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, x)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("%d campaign loads decoded for analysis hold %.0f octets each", len(held), float64(after.HeapAlloc-before.HeapAlloc)/float64(len(held)))
	runtime.KeepAlive(held)
	runtime.KeepAlive(raws)
}

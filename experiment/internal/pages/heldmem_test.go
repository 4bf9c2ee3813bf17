package pages

import (
	"os"
	"testing"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// TestHeldPerLoad prints what a page load decoded for analysis holds in
// memory, over the web-load results of the store DOXLAB_LOADS_STORE
// names (skipped without one): a report holds every load until the
// page-load cells stream, so this bounds a year's campaign. It prints a
// figure and asserts nothing of it: a heap's size is the garbage
// collector's to choose.
//
//	DOXLAB_LOADS_STORE=/var/tmp/doxlab-scale/seed.db go test -run TestHeldPerLoad -v ./experiment/internal/pages
func TestHeldPerLoad(t *testing.T) {
	path := os.Getenv("DOXLAB_LOADS_STORE")
	if path == "" {
		t.Skip("DOXLAB_LOADS_STORE names a store with web-load results")
	}
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var raws [][]byte
	if err := st.Results(t.Context(), "", store.Kind("web-load"), func(_ string, raw []byte) error {
		raws = append(raws, append([]byte(nil), raw...))
		return nil
	}); err != nil || len(raws) == 0 {
		t.Fatalf("no web-load results in %s: %v", path, err)
	}
	each := testutil.HeapHeld(20*len(raws), raws, func(i int) any {
		x, err := DecodeForAnalysis(raws[i%len(raws)])
		if err != nil {
			t.Fatal(err)
		}
		return x
	})
	t.Logf("%d loads decoded for analysis hold %.0f octets each", 20*len(raws), each)
}

package store_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// TestStoresAndDatasetsLeaveNoFileOpen: a report opens a store and its
// archive, reads them every way and closes them; a long-lived process
// (a worker, a server of reports) that did so leaving a file or a
// goroutine behind each time would run out of descriptors. Opened,
// read and closed over and over, they leave none.
func TestStoresAndDatasetsLeaveNoFileOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	s := campaignStore(t, path)
	archive := filepath.Join(dir, "archive")
	_, err := s.Archive(ctx, archive, cut)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	cycle := func() {
		t.Helper()
		r, err := store.Open(ctx, path)
		require.NoError(t, err)
		d, err := store.OpenDataset(ctx, archive)
		require.NoError(t, err)
		require.NoError(t, r.Attach(ctx, d))
		snapshot(t, r)
		require.NoError(t, r.Close())
	}
	cycle()
	time.Sleep(50 * time.Millisecond)
	files, routines := testutil.OpenFiles(t), runtime.NumGoroutine()
	for range testutil.Rounds(20) {
		cycle()
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if testutil.OpenFiles(t) <= files && runtime.NumGoroutine() <= routines {
			return
		}
	}
	t.Fatalf("files %d (%d before), goroutines %d (%d before)", testutil.OpenFiles(t), files, runtime.NumGoroutine(), routines)
}

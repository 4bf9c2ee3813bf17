package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestStoredResultsStream: SQLite reads a few runs' results in the
// order StoredResults hands them from the results' index, sorting only
// the ties in a start, so that the first comes at once: sorted whole,
// half a million page loads kept their decoding waiting for seconds.
func TestStoredResultsStream(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer s.Close()
	for _, after := range []int64{0, time.Now().UnixNano()} {
		q, args := storedQuery(`z`, nil, []string{"a", "b", "c"}, "load", after)
		all := testutil.QueryPlan(t, s.db, q, args...)
		require.Contains(t, all, "USING INDEX results_by_kind (kind=? AND run_id=?")
		require.NotContains(t, all, "TEMP B-TREE FOR ORDER BY", "sorted whole before the first: %s", all)
	}
}

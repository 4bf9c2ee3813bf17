package experiment_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

var decodeKind = store.NewKind("test-decode")

// TestDecodeResultsKeepsTheOrder: results decoded on every core come to
// fn in the order stored, across batches; a record that does not decode
// stops the read with its error, as does fn's.
func TestDecodeResultsKeepsTheOrder(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "r", Kind: "test", StartedAt: time.Unix(0, 0)}))
	const n = 1300 // two batches and a part
	for i := range n {
		require.NoError(t, st.WriteResult(ctx, "r", decodeKind, fmt.Sprint(i), time.Unix(int64(i), 0), i))
	}
	atoi := func(_ string, raw []byte) (int, error) { return strconv.Atoi(string(raw)) }
	var got []int
	require.NoError(t, experiment.DecodeResults(ctx, st, "", decodeKind, atoi, func(_ string, x int) error {
		got = append(got, x)
		return nil
	}))
	require.Len(t, got, n)
	for i, x := range got {
		require.Equal(t, i, x, "in the order stored")
	}
	bad := errors.New("bad record")
	err = experiment.DecodeResults(ctx, st, "", decodeKind, func(_ string, raw []byte) (int, error) {
		if string(raw) == "700" {
			return 0, bad
		}
		return strconv.Atoi(string(raw))
	}, func(string, int) error { return nil })
	require.ErrorIs(t, err, bad)
	seen := 0
	stop := errors.New("enough")
	err = experiment.DecodeResults(ctx, st, "", decodeKind, atoi, func(string, int) error {
		if seen++; seen == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, seen)
}

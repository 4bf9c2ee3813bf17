package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// fileDigests are the digests of a dataset's files but its manifest.
func fileDigests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "_manifest") {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = sha256.Sum256(b)
		return nil
	})
	return out
}

// TestArchiveInStepsLosesNothing: a campaign archived day by day as it
// goes (rounds written on later and later days, archives at cuts that
// move on, stand still or lie before the last), read with its archive
// attached, is after every step what the same writes give a store never
// archived; and an archive never rewrites a file an earlier one wrote.
func TestArchiveInStepsLosesNothing(t *testing.T) {
	for seed := range testutil.Seeds(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			path, archive := filepath.Join(dir, "s.db"), filepath.Join(dir, "archive")
			s, err := store.Open(ctx, path)
			require.NoError(t, err)
			defer s.Close()
			mirror, err := store.Open(ctx, filepath.Join(dir, "mirror.db"))
			require.NoError(t, err)
			defer mirror.Close()
			both := func(f func(*store.Store) error) {
				t.Helper()
				require.NoError(t, f(s))
				require.NoError(t, f(mirror))
			}
			runs := []string{"lab", "wild"}
			start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			for _, id := range runs {
				both(func(st *store.Store) error {
					return st.BeginRun(ctx, store.Run{ID: id, Kind: "measure", StartedAt: start, Profile: "fiber", Spec: []byte(`{}`)})
				})
			}
			rng := rand.New(rand.NewPCG(seed, 11))
			day, cut, i, moved := 0, 0, 0, int64(0)
			for step := range 8 {
				// A round today, on both runs, from two vantage points on wild.
				for range 1 + rng.IntN(4) {
					run := runs[rng.IntN(2)]
					at := start.AddDate(0, 0, day).Add(time.Duration(rng.IntN(86400)) * time.Second)
					x := &measure.Sample{Task: measure.Task{URL: "quic://t:853", Target: "t", Transport: "doq", Condition: "fresh", Rep: i}, Start: at,
						Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: float64(10 + i)},
							Bytes: transport.Counts{Sent: int64(i), Received: 2 * int64(i)}, Packets: transport.Counts{Sent: 1, Received: 1}},
						Status: transport.StatusOK}
					if run == "wild" {
						x.Vantage = &measure.Vantage{Name: []string{"fra1", "sin-2"}[i%2], Location: "Frankfurt, DE", ASN: 64500, Network: "Example", Address: "192.0.2.1"}
					}
					both(func(st *store.Store) error { return st.Write(ctx, run, x) })
					both(func(st *store.Store) error {
						return st.WriteResult(ctx, run, testLoad, fmt.Sprint("load-", i), at, map[string]any{"plt_ms": 100 + i})
					})
					i++
				}
				day += rng.IntN(3)
				// An archive at a cut that moves on, stands or goes back.
				cut = max(0, cut+rng.IntN(4)-1)
				was := fileDigests(t, archive)
				x, err := s.Archive(ctx, archive, start.AddDate(0, 0, cut))
				require.NoError(t, err, "seed %d step %d", seed, step)
				moved += x.Samples
				now := fileDigests(t, archive)
				for p, sum := range was {
					require.Equal(t, sum, now[p], "seed %d step %d: %s rewritten", seed, step, p)
				}

				// Read as a report would: the store with its archive.
				r, err := store.Open(ctx, path)
				require.NoError(t, err)
				if len(now) > 0 {
					d, err := store.OpenDataset(ctx, archive)
					require.NoError(t, err)
					require.NoError(t, r.Attach(ctx, d))
				}
				require.Equal(t, snapshot(t, mirror), snapshot(t, r), "seed %d step %d: cut at day %d of %d", seed, step, cut, day)
				require.NoError(t, r.Close())
			}
			require.Positive(t, moved, "seed %d: some samples were archived", seed)
		})
	}
}

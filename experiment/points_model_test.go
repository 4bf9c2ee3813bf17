package experiment_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// modelPoints reads results {"v": N} as the point N, packed as varints.
var modelPoints = experiment.Points[int64]{
	Kind:    "model-result",
	Summary: "model points",
	Point: func(_ string, raw []byte) (int64, error) {
		var x struct{ V int64 }
		err := json.Unmarshal(raw, &x)
		return x.V, err
	},
	Encode: func(ps []int64) ([]byte, error) {
		var b []byte
		for _, p := range ps {
			b = binary.AppendVarint(b, p)
		}
		return b, nil
	},
	Decode: func(dst []int64, b []byte) ([]int64, bool, error) {
		for len(b) > 0 {
			v, n := binary.Varint(b)
			if n <= 0 {
				return nil, false, fmt.Errorf("a point cut short")
			}
			dst, b = append(dst, v), b[n:]
		}
		return dst, true, nil
	},
}

// TestPointsAreTheResultsWhateverTheOrder: whatever order results are
// stored and read in (runs growing in turns, a result stored late with
// an earlier start, as a worker's can be, reports between, one of a run
// prefix, a summary that does not decode), every read gives the points
// of exactly the results stored, each once; and a report that follows a
// report with nothing stored between decodes no result.
func TestPointsAreTheResultsWhateverTheOrder(t *testing.T) {
	for seed := range testutil.Seeds(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
			require.NoError(t, err)
			defer st.Close()
			rng := rand.New(rand.NewPCG(seed, 3))
			runs := []string{"web-a", "web-b", "wild-c"}
			for _, id := range runs {
				require.NoError(t, st.BeginRun(ctx, store.Run{ID: id, Kind: "web", StartedAt: time.Unix(0, 0)}))
			}
			stored := map[string][]int64{}
			clock, v := time.Unix(1000, 0), int64(0)
			decoded := 0
			pts := modelPoints
			point := pts.Point
			pts.Point = func(run string, raw []byte) (int64, error) { decoded++; return point(run, raw) }
			read := func(f store.Filter, step int) {
				t.Helper()
				decoded = 0
				got, err := pts.Read(ctx, st, f)
				require.NoError(t, err)
				samePoints(t, stored, f, got, "seed %d, step %d, %+v", seed, step, f)
			}
			for step := range 25 {
				switch op := rng.IntN(11); {
				case op < 5: // a turn of results for one run, later and later
					run := runs[rng.IntN(len(runs))]
					for range 1 + rng.IntN(6) {
						clock, v = clock.Add(time.Second), v+1
						require.NoError(t, st.WriteResult(ctx, run, modelPoints.Kind, fmt.Sprint(v), clock, map[string]int64{"v": v}))
						stored[run] = append(stored[run], v)
					}
				case op < 6: // stored late: it started before what the run holds
					run := runs[rng.IntN(len(runs))]
					v++
					require.NoError(t, st.WriteResult(ctx, run, modelPoints.Kind, fmt.Sprint(v), time.Unix(500+v, 0), map[string]int64{"v": v}))
					stored[run] = append(stored[run], v)
				case op < 7: // a summary that does not decode
					run := runs[rng.IntN(len(runs))]
					sums, err := st.Summaries(ctx, modelPoints.Summary)
					require.NoError(t, err)
					if m, ok := sums[run]; ok {
						m.Data = append(m.Data, 0x80)
						require.NoError(t, st.PutSummary(ctx, modelPoints.Summary, run, m))
					}
				case op < 8:
					read(store.Filter{RunPrefix: "web-"}, step)
				case op < 10:
					read(store.Filter{}, step)
					read(store.Filter{}, step)
					require.Zero(t, decoded, "seed %d, step %d: a report again decodes no result", seed, step)
				default: // kept as store seal keeps them: the next report decodes none
					decoded = 0
					runs, points, err := pts.Keep(ctx, st, store.Filter{})
					require.NoError(t, err)
					if decoded == 0 {
						require.Zero(t, runs+points, "seed %d, step %d: nothing read, nothing kept", seed, step)
					}
					read(store.Filter{}, step)
					require.Zero(t, decoded, "seed %d, step %d: a report after Keep decodes no result", seed, step)
					runs, points, err = pts.Keep(ctx, st, store.Filter{})
					require.NoError(t, err)
					require.Zero(t, runs+points, "seed %d, step %d: kept again, nothing read", seed, step)
				}
			}
			read(store.Filter{}, -1)
		})
	}
}

// samePoints requires got to be the points of the results stored in the
// runs f's prefix selects, each once, in any order.
func samePoints(t *testing.T, stored map[string][]int64, f store.Filter, got []int64, msg ...any) {
	t.Helper()
	var want []int64
	for id, vs := range stored {
		if strings.HasPrefix(id, f.RunPrefix) {
			want = append(want, vs...)
		}
	}
	got = slices.Clone(got)
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got, msg...)
}

// TestPointsAreTheResultsAcrossArchives: results archived as a campaign
// goes (cuts that move on, stand or go back; a result stored late,
// started before a cut already archived), read as a report reads them,
// the store with its archive attached: every read gives the points of
// exactly the results stored, each once, from the store's rows, its
// summaries, the dataset's files and their summaries in the user's
// cache alike; and a report that follows a report decodes no result.
func TestPointsAreTheResultsAcrossArchives(t *testing.T) {
	for seed := range testutil.Seeds(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			t.Setenv("DOXLAB_CACHE", t.TempDir())
			dir := t.TempDir()
			path, archive := filepath.Join(dir, "s.db"), filepath.Join(dir, "archive")
			w, err := store.Open(ctx, path)
			require.NoError(t, err)
			defer w.Close()
			rng := rand.New(rand.NewPCG(seed, 5))
			runs := []string{"web-a", "web-b", "wild-c"}
			for _, id := range runs {
				require.NoError(t, w.BeginRun(ctx, store.Run{ID: id, Kind: "web", StartedAt: time.Unix(0, 0)}))
			}
			stored := map[string][]int64{}
			t0 := time.Unix(100000, 0)
			clock, v, archived := t0, int64(0), int64(0)
			decoded := 0
			pts := modelPoints
			point := pts.Point
			pts.Point = func(run string, raw []byte) (int64, error) { decoded++; return point(run, raw) }
			write := func(run string, at time.Time) {
				v++
				require.NoError(t, w.WriteResult(ctx, run, modelPoints.Kind, fmt.Sprint(v), at, map[string]int64{"v": v}))
				stored[run] = append(stored[run], v)
			}
			read := func(f store.Filter, step int) {
				t.Helper()
				r, err := store.Open(ctx, path)
				require.NoError(t, err)
				defer r.Close()
				if archived > 0 {
					d, err := store.OpenDataset(ctx, archive)
					require.NoError(t, err)
					require.NoError(t, r.Attach(ctx, d))
				}
				decoded = 0
				got, err := pts.Read(ctx, r, f)
				require.NoError(t, err)
				samePoints(t, stored, f, got, "seed %d, step %d, %+v, %d archived", seed, step, f, archived)
			}
			for step := range 20 {
				switch op := rng.IntN(10); {
				case op < 4: // a turn of results for one run
					run := runs[rng.IntN(len(runs))]
					for range 1 + rng.IntN(6) {
						clock = clock.Add(time.Duration(1+rng.IntN(3600)) * time.Second)
						write(run, clock)
					}
				case op < 5: // stored late: started long before
					write(runs[rng.IntN(len(runs))], t0.Add(time.Duration(rng.IntN(int(clock.Sub(t0).Seconds())+1))*time.Second))
				case op < 7: // archived up to a cut before now
					cut := clock.Add(-time.Duration(rng.IntN(4*3600)) * time.Second)
					x, err := w.Archive(ctx, archive, cut)
					require.NoError(t, err, "seed %d, step %d", seed, step)
					archived += x.Results
				case op < 8:
					read(store.Filter{RunPrefix: "web-"}, step)
				default:
					read(store.Filter{}, step)
					read(store.Filter{}, step)
					require.Zero(t, decoded, "seed %d, step %d: a report again decodes no result", seed, step)
				}
			}
			read(store.Filter{}, -1)
			read(store.Filter{}, -1)
			require.Zero(t, decoded, "seed %d: a report again decodes no result", seed)
		})
	}
}

package campaign_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// scriptedLoaders make page loaders whose loads go as a script says, a
// step per load across every loader made: "ok", "timeout" (the page
// failed: a load with its status) or "broken" (the loader itself broke,
// as when the browser is lost). Chromium cannot be made to break on cue;
// the real loader's campaigns run in experiment/web's tests.
type scriptedLoaders struct {
	mu             sync.Mutex
	script         []string
	made, closed   int
	loads          []measure.Task
	policy, refuse bool // every load had the plan's policy, and its stub's upstream the policy's check
}

type scriptedLoader struct{ s *scriptedLoaders }

func (s *scriptedLoaders) make(campaign.PageLoaderConfig) (campaign.PageLoader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made++
	return scriptedLoader{s}, nil
}

func (l scriptedLoader) Load(_ context.Context, t measure.Task, o campaign.PageOptions) (*campaign.PageLoad, error) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = s.policy && o.Policy != nil
	s.refuse = s.refuse && o.Upstream.Refuse != nil
	step := "ok"
	if len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
	}
	if step == "broken" {
		return nil, errors.New("the browser was lost")
	}
	s.loads = append(s.loads, t)
	return &campaign.PageLoad{Task: t, Start: time.Now(), Status: step, PLTMs: 120, Load: []byte(`{}`)}, nil
}

func (l scriptedLoader) Close() error {
	l.s.mu.Lock()
	l.s.closed++
	l.s.mu.Unlock()
	return nil
}

// TestPageCampaignHere: a page-load campaign measured on this machine
// stores each load as it comes, with the targets file's note on its
// resolver, and counts its progress; a loader that breaks is closed and
// a new one made for the same task, three tries at most, after which
// the campaign stops with the loads so far stored; run again with what
// is stored, it measures only the rest. A page that fails is a load, not
// a broken loader.
func TestPageCampaignHere(t *testing.T) {
	loaders := &scriptedLoaders{policy: true, refuse: true}
	campaign.RegisterPageLoader(loaders.make)
	t.Cleanup(func() { campaign.RegisterPageLoader(nil) })
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.txt")
	require.NoError(t, os.WriteFile(targets, []byte("9.9.9.9 # doq, 0-RTT\n149.112.112.112\n"), 0o644))
	c := &measure.Campaign{Name: "pages", TargetsFile: targets, Transports: []string{"doq"}, Contact: "https://lab.example/doxlab",
		Pages: &measure.CampaignPages{URLs: []string{"https://a.example/", "https://b.example/"}}}
	p, tasks, err := campaign.NewPlan(c)
	require.NoError(t, err)
	require.Len(t, tasks, 4, "2 resolvers × 2 pages")
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "x.db"))
	require.NoError(t, err)
	defer st.Close()
	run := store.NewRun(campaign.Kind, "", p)
	require.NoError(t, st.BeginRun(ctx, run))

	// The first load, a failed page, then three breaks in a row.
	loaders.script = []string{"ok", "timeout", "broken", "broken", "broken"}
	var progress [][2]int
	h := &campaign.Here{Store: st, Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }}
	loads, err := h.Run(ctx, run.ID, p, tasks, nil)
	require.ErrorContains(t, err, "the page loader failed 3 times in a row: the browser was lost")
	require.Len(t, loads, 2)
	require.Equal(t, "timeout", loads[1].Status, "a page that failed is a load")
	require.Equal(t, 3, loaders.made, "the first loader, and one after each of the first two breaks")
	require.Equal(t, 3, loaders.closed, "each broken loader closed")
	require.Equal(t, [][2]int{{1, 4}, {2, 4}}, progress)
	done, err := st.ResultsDone(ctx, run.ID, campaign.PageLoads)
	require.NoError(t, err)
	require.Len(t, done, 2, "what was measured before the stop is stored")
	for _, x := range loads {
		require.True(t, done[x.Key()], x.Key())
		want := map[string]string{"9.9.9.9": "doq, 0-RTT"}[x.Target]
		require.Equal(t, want, x.Resolver, "the targets file's note for %s", x.Target)
	}

	// Again, with what is stored: a break, then the rest.
	loaders.script = []string{"broken"}
	loaders.loads = nil
	progress = nil
	rest, err := h.Run(ctx, run.ID, p, tasks, done)
	require.NoError(t, err)
	require.Len(t, rest, 2)
	require.Equal(t, tasks[2:], loaders.loads, "only the tasks not stored, in order")
	require.Equal(t, [][2]int{{3, 4}, {4, 4}}, progress)
	done, err = st.ResultsDone(ctx, run.ID, campaign.PageLoads)
	require.NoError(t, err)
	require.Len(t, done, 4)
	require.True(t, loaders.policy, "every load had the plan's address policy")
	require.True(t, loaders.refuse, "and its stub's upstream the policy's check")
}

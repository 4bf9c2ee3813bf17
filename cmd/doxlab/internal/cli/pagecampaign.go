package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/progress"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// pageRun is how campaign run measures a page-load campaign here.
type pageRun struct {
	store, runID string
	args         []string // the command's own (after "doxlab"), for hints
	loader       campaign.PageLoaderConfig
	fresh, json  bool
}

// runPageCampaign measures a page-load campaign on this machine, one
// load at a time, each stored as it is measured; run again on the same
// spec it continues the spec's unfinished run, as a DNS campaign does.
func runPageCampaign(c *measure.Campaign, pr pageRun, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "doxlab campaign: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	plan, tasks, err := campaign.NewPlan(c)
	if err != nil {
		return fail(err)
	}
	if pr.runID != "" && !storeExists(pr.store) {
		return fail(fmt.Errorf("--run %s: no store at %s", pr.runID, pr.store))
	}
	st, err := store.Open(ctx, pr.store)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	run := store.NewRun(campaign.Kind, "", plan)
	if pr.runID == "" && !pr.fresh {
		if pr.runID = lastRunOf(ctx, st, campaign.Kind, run.Spec); pr.runID != "" {
			fmt.Fprintf(stderr, "doxlab campaign: continuing this spec's run %s (--new begins a new run)\n", pr.runID)
		}
	}
	done := map[string]bool{}
	if pr.runID != "" {
		if err := knownRun(ctx, st, pr.runID, campaign.Kind); err != nil {
			return fail(err)
		}
		if done, err = st.ResultsDone(ctx, pr.runID, campaign.PageLoads); err != nil {
			return fail(err)
		}
		if len(done) >= len(tasks) {
			fmt.Fprintf(stderr, "doxlab campaign: run %s of this spec is complete (%d page loads); add --new to measure it again as a new run, or see it with: %s\n", pr.runID, len(done), reportHint(pr.store, pr.runID))
			return exitUsage
		}
		run.ID = pr.runID
	} else {
		if err := st.BeginRun(ctx, run); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stderr, "doxlab campaign: run %s: %d page loads, each after a warm-up load (continue it with: %s)\n", run.ID, len(tasks), continueHint(pr.args, run.ID))
	}
	meter := progress.New(stderr, "page loads")
	h := &campaign.Here{Store: st, Pages: pr.loader, Log: stderr, Progress: meter.Update}
	if pr.json {
		enc := json.NewEncoder(stdout)
		h.Loaded = func(x *campaign.PageLoad) { enc.Encode(x) }
	}
	loads, err := h.Run(ctx, run.ID, plan, tasks, done)
	meter.Done()
	failed := 0
	for _, x := range loads {
		if x.Status != "ok" {
			failed++
		}
	}
	if !pr.json {
		fmt.Fprintf(stdout, "%d page loads measured and stored in run %s, %d failed; see them with: %s\n", len(loads), run.ID, failed, reportHint(pr.store, run.ID))
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "doxlab campaign: stopped (%v) after %d page loads, all stored; continue with: %s\n", err, len(loads), continueHint(pr.args, run.ID))
		return 1
	case len(loads) > 0 && failed == len(loads):
		fmt.Fprintf(stderr, "doxlab campaign: every one of the %d page loads failed\n", failed)
		return 1
	}
	return exitOK
}

// lastRunOf is the last run of kind whose spec is spec, "" if none.
func lastRunOf(ctx context.Context, st *store.Store, kind string, spec []byte) string {
	runs, err := st.Runs(ctx)
	if err != nil {
		return ""
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Kind == kind && string(runs[i].Spec) == string(spec) {
			return runs[i].ID
		}
	}
	return ""
}

package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/suggest"
	"github.com/doxlab/doxlab/store"
)

// ForcedKind records a resume that --force let through with a design
// other than the stored one: the differences, beside the run's samples.
var ForcedKind = store.NewKind("resume-forced")

// StoredIDs lists the experiment IDs the store's runs belong to (each
// run's spec names its experiment), oldest first.
func StoredIDs(ctx context.Context, st *store.Store) ([]string, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range runs {
		if id := experimentOf(r); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// experimentOf is the experiment a run belongs to, "" for a run of none.
func experimentOf(r store.Run) string {
	var spec struct {
		Experiment string `json:"experiment"`
	}
	if json.Unmarshal(r.Spec, &spec) != nil {
		return ""
	}
	return spec.Experiment
}

// StoredDesign is the design (flag values by name) experiment id was
// begun with: what its first run recorded; nil for an experiment from
// before designs were recorded. It fails, naming the closest, when the
// store holds no experiment id.
func StoredDesign(ctx context.Context, st *store.Store, id string) (map[string]string, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range runs {
		exp := experimentOf(r)
		if exp != id {
			if exp != "" && !slices.Contains(ids, exp) {
				ids = append(ids, exp)
			}
			continue
		}
		var spec struct {
			Design map[string]string `json:"design"`
		}
		json.Unmarshal(r.Spec, &spec) // experimentOf read it
		return spec.Design, nil
	}
	return nil, fmt.Errorf("no experiment %q in the store%s", id, suggest.Closest(id, ids))
}

// checkResume fails unless the store holds the experiment to resume,
// exactly by its ID, naming the closest IDs it does hold.
func (e *Env) checkResume(ctx context.Context, st *store.Store) error {
	if e.Resume == "" {
		return nil
	}
	ids, err := StoredIDs(ctx, st)
	if err != nil {
		return err
	}
	if !slices.Contains(ids, e.Resume) {
		return fmt.Errorf("no experiment %q in %s%s", e.Resume, store.Redact(e.Store), suggest.Closest(e.Resume, ids))
	}
	if e.Design == nil || e.Force {
		return nil // BeginRun records a forced resume, run by run
	}
	// Another design is refused before a network is built for it (a
	// testbed takes seconds, and root): BeginRun checks each run again.
	stored, err := StoredDesign(ctx, st, e.Resume)
	if err != nil {
		return err
	}
	return designChanged(stored, e.Design)
}

// designChanged is ErrDesignChanged with the differences, or nil when
// there are none or the stored run recorded no design.
func designChanged(stored, now map[string]string) error {
	if stored == nil {
		return nil
	}
	if diff := DesignDiff(stored, now); len(diff) > 0 {
		return fmt.Errorf("%w: %s", ErrDesignChanged, strings.Join(diff, "; "))
	}
	return nil
}

// ExperimentID is the ID to resume (checked against the store by Start)
// or a new one with the prefix, said on the log with the command that
// resumes it, before anything is measured.
func (e *Env) ExperimentID(prefix string) (string, error) {
	id := e.Resume
	if id == "" {
		id = prefix + "-" + store.NewID()
		fmt.Fprintf(e.Log, "%s: experiment %s (continue it with: doxlab experiment %s --resume %s --store %s)\n", prefix, id, cmdName(prefix), id, e.Store)
		return id, nil
	}
	if !strings.HasPrefix(id, prefix+"-") {
		return "", fmt.Errorf("experiment %q is not a %s experiment", id, cmdName(prefix))
	}
	fmt.Fprintf(e.Log, "%s: continuing experiment %s\n", prefix, id)
	return id, nil
}

// cmdName is the command-line name of an experiment whose IDs start
// with prefix.
func cmdName(prefix string) string {
	if prefix == "dnsrtt" {
		return "dns-rtt"
	}
	return prefix
}

// BeginRun records a run of an experiment, with its design (Env.Design)
// in its spec and its method's version (Info.Method). A resumed
// experiment continues its runs: the design and the method must be the
// ones stored, unless Env.Force, which the run then records
// (ForcedKind).
func (e *Env) BeginRun(ctx context.Context, st *store.Store, runID, kind, profile string, spec map[string]any) error {
	e.progressMu.Lock()
	e.begun = append(e.begun, runID)
	e.progressMu.Unlock()
	spec = maps.Clone(spec)
	if e.Design != nil {
		spec["design"] = e.Design
	}
	if e.started != "" {
		spec["net"] = e.started // the report tells loopback's timings from the testbed's
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(runs, func(r store.Run) bool { return r.ID == runID })
	method := MethodOf(kind)
	if i < 0 {
		run := store.NewRun(kind, profile, spec)
		run.ID, run.Method = runID, method
		return st.BeginRun(ctx, run)
	}
	// A run goes on with the method it began with: its samples would
	// otherwise mix two. A run from before methods were recorded (0) is
	// of an unknown one, and goes on as designs do.
	if was := runs[i].Method; was != 0 && was != method {
		if !e.Force {
			return fmt.Errorf("%w: run %s measured with method v%d, this doxlab's is v%d: begin a new experiment (or --force)", ErrMethodChanged, runID, was, method)
		}
		diff := []string{fmt.Sprintf("method: v%d → v%d", was, method)}
		if err := e.forced(ctx, st, runID, diff, map[string]any{"stored_method": was, "method": method}); err != nil {
			return err
		}
	}
	var stored struct {
		Design map[string]string `json:"design"`
	}
	if json.Unmarshal(runs[i].Spec, &stored) != nil || stored.Design == nil || e.Design == nil {
		return nil // a run from before designs were recorded, or a caller without one
	}
	diff := DesignDiff(stored.Design, e.Design)
	if len(diff) == 0 {
		return nil
	}
	if !e.Force {
		return designChanged(stored.Design, e.Design)
	}
	return e.forced(ctx, st, runID, diff, map[string]any{"stored": stored.Design, "now": e.Design})
}

// forced records a resume that --force let through although what it
// measures differs from what the run began with: said on the log, and
// stored with the run (ForcedKind) as the differences and detail.
func (e *Env) forced(ctx context.Context, st *store.Store, runID string, diff []string, detail map[string]any) error {
	fmt.Fprintf(e.Log, "%s: resuming with a change, as forced: %s\n", runID, strings.Join(diff, "; "))
	detail["differences"] = diff
	return st.WriteResult(ctx, runID, ForcedKind, time.Now().UTC().Format(time.RFC3339Nano), time.Now(), detail)
}

// ErrMethodChanged is resuming a run with a doxlab whose method for the
// experiment is another version than the run's.
var ErrMethodChanged = fmt.Errorf("the experiment's method changed")

// ErrDesignChanged is resuming an experiment with other design flags
// than it was begun with: its samples would mix two designs.
var ErrDesignChanged = fmt.Errorf("the experiment was begun with another design")

// ErrBadDesign marks an error in what an experiment was asked to
// measure (a profile, transport or condition it does not know), found
// before anything ran: the caller's to fix, not the run's.
var ErrBadDesign = fmt.Errorf("not a design the experiment can run")

// BadDesign marks err as ErrBadDesign, its message unchanged; nil stays
// nil.
func BadDesign(err error) error {
	if err == nil {
		return nil
	}
	return badDesign{err}
}

type badDesign struct{ error }

func (b badDesign) Unwrap() []error { return []error{b.error, ErrBadDesign} }

// DesignDiff lists how b differs from a: "repeat: 3 → 5".
func DesignDiff(a, b map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[k]; !ok || v != a[k] {
			out = append(out, fmt.Sprintf("%s: %q → %q", k, a[k], v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: (unset) → %q", k, b[k]))
		}
	}
	return out
}

package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// startServer starts doxlab's server inside the testbed's server host:
// its listeners' sockets are made there. The caller closes it.
func startServer(tb *testbed.Testbed, cfg *server.Config) (*server.Server, error) {
	srv, err := server.StartIn(cfg, func(f func() error) error { return tb.Run("server", f) })
	if err != nil {
		return nil, fmt.Errorf("starting the server in the testbed: %w", err)
	}
	return srv, nil
}

// defaultSelf sets an empty binary path to this program's, which the
// experiments run inside testbed hosts.
func defaultSelf(path *string) error {
	if *path != "" {
		return nil
	}
	self, err := os.Executable()
	*path = self
	return err
}

// experimentID is the ID to resume, or a new one with the prefix.
func experimentID(resume, prefix string) string {
	if resume != "" {
		return resume
	}
	return prefix + "-" + store.NewID()
}

// beginRun records a run of an experiment unless it exists (a resumed
// experiment continues its runs).
func beginRun(ctx context.Context, st *store.Store, runID, kind, profile string, spec any) error {
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.ID == runID {
			return nil
		}
	}
	run := store.NewRun(kind, profile, spec)
	run.ID = runID
	return st.BeginRun(ctx, run)
}

// loadResults decodes the stored results of one kind from the runs keep
// accepts.
func loadResults[T any](ctx context.Context, st *store.Store, kind store.Kind, keep func(runID string) bool) ([]*T, error) {
	var out []*T
	err := st.Results(ctx, "", kind, func(id string, raw []byte) error {
		if !keep(id) {
			return nil
		}
		v := new(T)
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// ofExperiment keeps the runs of one experiment (its ID is their prefix).
func ofExperiment(expID string) func(string) bool {
	return func(id string) bool { return strings.HasPrefix(id, expID) }
}

// ofRun keeps one run exactly: "-4g" is a prefix of "-4g-medium".
func ofRun(runID string) func(string) bool {
	return func(id string) bool { return id == runID }
}

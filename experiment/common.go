package experiment

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// startServer starts doxlab's server inside a testbed host: its
// listeners' sockets are made there. The caller closes it.
func startServer(tb *testbed.Testbed, host string, cfg *server.Config) (*server.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var srv *server.Server
	if err := tb.Run(host, func() error {
		var err error
		if srv, err = server.New(cfg); err == nil {
			err = srv.Start()
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("starting the server in the testbed: %w", err)
	}
	return srv, nil
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

// loadResults decodes an experiment's stored results of one kind.
func loadResults[T any](ctx context.Context, st *store.Store, expID, kind string) ([]*T, error) {
	var out []*T
	err := st.Results(ctx, expID, kind, func(_ string, raw []byte) error {
		v := new(T)
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

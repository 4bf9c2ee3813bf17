package corpus

import (
	"embed"
	"errors"
	"fmt"

	"github.com/doxlab/doxlab/pageload"
)

// The corpus pages' dependency graphs, captured from Chromium by
// `make graphs` (corpus/internal/gengraphs), for doxlab's page loader.
//
//go:embed graphs
var graphs embed.FS

// ErrNoGraph is a page without a shipped dependency graph: one must be
// captured from Chromium first.
var ErrNoGraph = errors.New("no shipped graph")

// Graph is a built-in page's dependency graph as shipped. A page added
// with Snapshot has none: capture one (doxlab load --capture).
func Graph(page string) (*pageload.Graph, error) {
	b, err := graphs.ReadFile("graphs/" + page + ".json")
	if err != nil {
		return nil, fmt.Errorf("page %q: %w", page, ErrNoGraph)
	}
	g, err := pageload.ParseGraph(b)
	if err != nil {
		return nil, fmt.Errorf("page %q's shipped graph: %w", page, err)
	}
	return g, nil
}

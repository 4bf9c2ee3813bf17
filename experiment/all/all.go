// Package all registers every experiment: import it for its side effect,
// as the CLI does, to have experiment.Registered list them all, in
// Order.
package all

import "github.com/doxlab/doxlab/experiment"

// Every experiment folder is imported in imports.go, and the docs that
// list the experiments are written from the registry: both generated.
//
//go:generate go run ./internal/genimports ..
//go:generate go run ./internal/gendocs ../..

// Order is the one list of the experiments, in the order the papers'
// method goes: every list of them (help, report sections, docs) follows
// it. A new experiment is added here by hand: its place is a choice.
var Order = []string{"dns-rtt", "web", "coalescing", "hol", "amplification", "overhead", "privacy", "server-load"}

func init() { experiment.SetOrder(Order...) }

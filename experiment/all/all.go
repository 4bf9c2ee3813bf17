// Package all registers every experiment: import it for its side effect,
// as the CLI does, to have experiment.Registered list them all, in
// Order.
package all

import (
	"github.com/doxlab/doxlab/experiment"
	_ "github.com/doxlab/doxlab/experiment/amplification"
	_ "github.com/doxlab/doxlab/experiment/coalescing"
	_ "github.com/doxlab/doxlab/experiment/dnsrtt"
	_ "github.com/doxlab/doxlab/experiment/hol"
	_ "github.com/doxlab/doxlab/experiment/overhead"
	_ "github.com/doxlab/doxlab/experiment/privacy"
	_ "github.com/doxlab/doxlab/experiment/serverload"
	_ "github.com/doxlab/doxlab/experiment/web"
)

// Order is the one list of the experiments, in the order the papers'
// method goes: every list of them (help, report sections, docs) follows
// it.
var Order = []string{"dns-rtt", "web", "coalescing", "hol", "amplification", "overhead", "privacy", "server-load"}

func init() { experiment.SetOrder(Order...) }

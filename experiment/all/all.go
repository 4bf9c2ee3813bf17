// Package all registers every experiment: import it for its side effect,
// as the CLI does, to have experiment.Registered list them all.
package all

import (
	_ "github.com/doxlab/doxlab/experiment/amplification"
	_ "github.com/doxlab/doxlab/experiment/coalescing"
	_ "github.com/doxlab/doxlab/experiment/dnsrtt"
	_ "github.com/doxlab/doxlab/experiment/hol"
	_ "github.com/doxlab/doxlab/experiment/overhead"
	_ "github.com/doxlab/doxlab/experiment/pageloads"
	_ "github.com/doxlab/doxlab/experiment/serverload"
)

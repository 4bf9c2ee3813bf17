package experiment

import "github.com/doxlab/doxlab/internal/netns"

// loopbackUp brings up lo where it is down: in a network namespace of
// one's own (unshare -rn), where the loopback net is run without root.
func loopbackUp() error { return netns.LoopbackUp() }

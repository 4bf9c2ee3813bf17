package other

import "testing"

// TestScaled shares a timed test's name in another package: the timed
// lane runs it, as every other lane skips it.
func TestScaled(t *testing.T) {}

func TestOwn(t *testing.T) {}

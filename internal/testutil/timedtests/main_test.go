package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindsTimedTests: a test that calls Scaled, or a helper of its
// package that calls Timed, is listed; one that does neither is not.
func TestFindsTimedTests(t *testing.T) {
	out, err := exec.Command("go", "run", ".", "testdata").Output()
	require.NoError(t, err)
	require.Equal(t, "./testdata/pkg TestScaled|TestThroughHelper\n", string(out))
}

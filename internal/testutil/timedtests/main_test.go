package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindsTimedTests: a test that calls Scaled, or a helper of its
// package that calls Timed, is listed; one that does neither is not; a
// model test calling Seeds is listed with -seeded only.
func TestFindsTimedTests(t *testing.T) {
	out, err := exec.Command("go", "run", ".", "testdata").Output()
	require.NoError(t, err)
	require.Equal(t, "./testdata/pkg TestScaled|TestThroughHelper\n", string(out))
	out, err = exec.Command("go", "run", ".", "-seeded", "testdata").Output()
	require.NoError(t, err)
	require.Equal(t, "./testdata/pkg TestModel|TestScaled|TestThroughHelper\n", string(out))
}

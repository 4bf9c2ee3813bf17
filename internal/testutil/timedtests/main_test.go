package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindsTimedTests: a test that calls Scaled, or a helper of its
// package that calls Timed, is listed; one that does neither is not; a
// model test calling Seeds, or a leak test calling Rounds, is listed
// with -seeded only. -lane gives the
// timed lane's anchored regexp, and the packages holding a test of one of
// its names: a timed package's, and another package's test that shares a
// timed test's name (every other lane skips it), not a package without.
func TestFindsTimedTests(t *testing.T) {
	out, err := exec.Command("go", "run", ".", "testdata").Output()
	require.NoError(t, err)
	require.Equal(t, "./testdata/pkg TestScaled|TestThroughHelper\n", string(out))
	out, err = exec.Command("go", "run", ".", "-seeded", "testdata").Output()
	require.NoError(t, err)
	require.Equal(t, "./testdata/pkg TestLeak|TestModel|TestScaled|TestThroughHelper\n", string(out))
	out, err = exec.Command("go", "run", ".", "-lane", "testdata").Output()
	require.NoError(t, err)
	require.Equal(t, "^(TestScaled|TestThroughHelper)$\n./testdata/other\n./testdata/pkg\n", string(out))
}

package pkg

import "testing"

func TestScaled(t *testing.T) { _ = testutil.Scaled(1) }

func TestThroughHelper(t *testing.T) { wait(t) }

func wait(t *testing.T) { testutil.Timed(t) }

func TestUntimed(t *testing.T) {}

func TestModel(t *testing.T) {
	for range testutil.Seeds(3) {
	}
}

func TestLeak(t *testing.T) {
	for range testutil.Rounds(20) {
	}
}

package campaign

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJobBudgetCoversThePacing: at rate 0.05 (a task every 20 s) a job
// may wait its turn behind every other task its worker holds; its time
// budget adds that wait to the measurement's, so it is not timed out
// and retried while it waits (1 of 4 were stored after 120 s before).
func TestJobBudgetCoversThePacing(t *testing.T) {
	p := &Plan{Timeout: time.Second, Rate: 0.05}
	require.Equal(t, 13*time.Second, p.taskBudget(), "warm-up, measurement and probe, and a margin")
	require.Equal(t, 100*time.Second, paceAllowance(p.Rate, 4), "four tasks ahead and its own turn, 20 s each")
	require.Zero(t, paceAllowance(0, 4), "no rate, no wait")
}

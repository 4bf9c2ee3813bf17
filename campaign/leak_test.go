package campaign_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
)

// TestWorkersLeaveNothingRunning: a worker started and drained (as a
// supervisor restarts one, or `worker --drain` runs a round from cron)
// leaves the process's goroutines where they were: its queue client,
// its jobs' transports and the store's notifications stop with it.
func TestWorkersLeaveNothingRunning(t *testing.T) {
	ctx := context.Background()
	st, srv := postgresAndServer(t)
	udp, dot := "udp://"+srv.Addr("udp").String(), "tls://"+srv.Addr("dot").String()
	n := 0
	round := func() {
		t.Helper()
		n++
		c := &measure.Campaign{Name: fmt.Sprint("leak", n), AllowSpecial: loopback, Targets: []string{udp, dot}, Conditions: []string{"fresh"}, Repeat: 2,
			Timeout: 2 * time.Second, TLS: measure.CampaignTLS{Insecure: true}, Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "fra1"}}}}
		_, _, err := campaign.PlanCampaign(ctx, st, c)
		require.NoError(t, err)
		var stored atomic.Int32 // told from the worker's goroutines
		w := &campaign.Worker{Store: st, Vantage: "fra1", Concurrency: 2, Drain: true, Stored: func(*measure.Sample) { stored.Add(1) }}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, w.Run(wctx))
		require.Equal(t, int32(4), stored.Load())
	}
	testutil.NoGrowth(t, 2, round)
}

package campaign_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// BenchmarkQueueOverhead is what the queue adds to a task: the same UDP
// tasks against a loopback server measured one at a time by measure.Run
// and by one worker taking them from PostgreSQL (fetch, the sample's
// transaction, the job's completion). It reports the time per task of
// each, from the first sample to the last, and their difference:
//
//	go test -run - -bench QueueOverhead -benchtime 500x ./campaign
func BenchmarkQueueOverhead(b *testing.B) {
	ctx := context.Background()
	dsn := testutil.StartPostgres(b)
	srv := loopbackServer(b)
	st, err := store.Open(ctx, dsn)
	require.NoError(b, err)
	defer st.Close()
	n := max(b.N, 20)
	target := "udp://" + srv.Addr("udp").String()
	perTask := func(stamps []time.Time) float64 {
		return float64(stamps[len(stamps)-1].Sub(stamps[0]).Microseconds()) / 1000 / float64(len(stamps)-1)
	}

	var local []time.Time
	spec := measure.Spec{Targets: []string{target}, Transports: []string{"udp"}, Conditions: []string{"fresh"}, Repeat: n, Timeout: 2 * time.Second, Concurrency: 1}
	require.NoError(b, measure.Run(ctx, spec, func(*measure.Sample) { local = append(local, time.Now()) }))

	c := &measure.Campaign{Name: "overhead", AllowSpecial: loopback, Targets: []string{target}, Transports: []string{"udp"}, Conditions: []string{"fresh"}, Repeat: n, Timeout: 2 * time.Second,
		Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "here"}}}}
	_, _, err = campaign.PlanCampaign(ctx, st, c)
	require.NoError(b, err)
	var queued []time.Time
	w := &campaign.Worker{Store: st, Vantage: "here", Concurrency: 1, Drain: true, Stored: func(*measure.Sample) { queued = append(queued, time.Now()) }}
	b.ResetTimer()
	require.NoError(b, w.Run(ctx))
	b.StopTimer()
	require.Len(b, queued, n)
	l, q := perTask(local), perTask(queued)
	b.ReportMetric(l, "local-ms/task")
	b.ReportMetric(q, "queued-ms/task")
	b.ReportMetric(q-l, "queue-ms/task")
}

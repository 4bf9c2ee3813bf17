package campaign_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
)

// loopbackServer serves DNS on every transport on loopback.
func loopbackServer(t testing.TB) *server.Server {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0", TCP: "127.0.0.1:0", DoT: "127.0.0.1:0", DoQ: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.7"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
	return srv
}

// postgresAndServer are a PostgreSQL store, closed when the test ends,
// and a doxlab server on loopback to measure.
func postgresAndServer(t testing.TB) (*store.Store, *server.Server) {
	t.Helper()
	st, err := store.Open(context.Background(), testutil.StartPostgres(t))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, loopbackServer(t)
}

// TestPlanAndWorkers plans a campaign for two vantage points, each with
// its own resolver set, and drains it with two workers each: every task
// is stored once, labelled with its vantage point, and the status says
// so.
func TestPlanAndWorkers(t *testing.T) {
	ctx := context.Background()
	st, srv := postgresAndServer(t)
	udp, dot := "udp://"+srv.Addr("udp").String(), "tls://"+srv.Addr("dot").String()
	c := &measure.Campaign{Name: "two", AllowSpecial: loopback, Targets: []string{udp, dot}, Conditions: []string{"fresh", "resumed"}, Repeat: 3, Timeout: 2 * time.Second,
		TLS: measure.CampaignTLS{Insecure: true},
		Vantages: []measure.CampaignVantage{
			{Vantage: measure.Vantage{Name: "fra1", Location: "Frankfurt, DE", Network: "Example", ASN: 64500}},
			{Vantage: measure.Vantage{Name: "nyc1"}, Targets: []string{udp}},
		}}
	run, plan, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	require.Equal(t, 9, plan.Vantages[0].Tasks, "udp fresh and dot fresh+resumed, 3 times")
	require.Equal(t, 3, plan.Vantages[1].Tasks)

	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := map[string]int{}
	for i := range 4 {
		w := &campaign.Worker{Store: st, Vantage: []string{"fra1", "nyc1"}[i%2], Concurrency: 2, Drain: true,
			Stored: func(x *measure.Sample) { mu.Lock(); stored[x.Vantage.Name]++; mu.Unlock() }}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			require.NoError(t, w.Run(wctx))
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]int{"fra1": 9, "nyc1": 3}, stored)

	rows, err := st.Rows(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, rows, 12)
	for _, r := range rows {
		require.Equal(t, "ok", r.Status, r.URL)
		require.Equal(t, "127.0.0.1", r.VantageAddress, "the address the worker measured from")
		require.EqualValues(t, 1, r.JobAttempt)
		if r.Vantage == "fra1" {
			require.Equal(t, "Frankfurt, DE", r.VantageLocation)
			require.EqualValues(t, 64500, r.VantageASN)
		} else {
			require.Equal(t, "udp", r.Transport, "nyc1 measures its own resolver set")
		}
	}
	s, err := campaign.GetStatus(ctx, st, run.ID)
	require.NoError(t, err)
	for _, v := range s.Vantages {
		require.Equal(t, v.Planned, v.Stored, v.Vantage)
		require.Zero(t, v.Running+v.Waiting+v.Failed, v.Vantage)
		require.NotZero(t, v.Workers, v.Vantage)
	}
	latest, err := campaign.LatestPlanned(ctx, st)
	require.NoError(t, err)
	require.Equal(t, run.ID, latest)

	// A job delivered again after its sample was stored (as when a
	// worker's acknowledgement is lost): measured, not stored twice, and
	// recorded as a duplicate.
	res, err := st.DB().ExecContext(ctx, `UPDATE river_job SET state = 'available', finalized_at = NULL
		WHERE id = (SELECT min(id) FROM river_job WHERE queue = 'vantage-nyc1')`)
	require.NoError(t, err)
	n, _ := res.RowsAffected()
	require.EqualValues(t, 1, n)
	w := &campaign.Worker{Store: st, Vantage: "nyc1", Drain: true}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, w.Run(wctx))
	require.Equal(t, campaign.WorkerStats{Duplicates: 1}, w.Stats())
	s, err = campaign.GetStatus(ctx, st, run.ID)
	require.NoError(t, err)
	require.Equal(t, 3, s.Vantages[1].Stored, "still one sample per task")
	require.Equal(t, 1, s.Vantages[1].Duplicates)
	require.Equal(t, 1, s.Vantages[1].Retried, "the job's second delivery is counted")
	rows, err = st.Rows(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, rows, 12)

	// A second plan, cancelled before any worker takes it: nothing is
	// left to take, and the status says so.
	again, _, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	waiting, running, err := campaign.Cancel(ctx, st, again.ID)
	require.NoError(t, err)
	require.Equal(t, 12, waiting)
	require.Zero(t, running)
	s, err = campaign.GetStatus(ctx, st, again.ID)
	require.NoError(t, err)
	for _, v := range s.Vantages {
		require.Equal(t, v.Planned, v.Failed, "%s: every job cancelled", v.Vantage)
		require.Zero(t, v.Waiting+v.Stored, v.Vantage)
	}
}

// TestPlanNeedsPostgres refuses a SQLite store with a line that says
// what to do instead.
func TestPlanNeedsPostgres(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir()+"/x.db")
	require.NoError(t, err)
	defer st.Close()
	_, _, err = campaign.PlanCampaign(context.Background(), st, &measure.Campaign{Targets: []string{"127.0.0.1"}, AllowSpecial: loopback, Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "a"}}}})
	require.ErrorContains(t, err, "PostgreSQL")
	require.ErrorContains(t, (&campaign.Worker{Store: st, Vantage: "a"}).Run(context.Background()), "PostgreSQL")
}

// TestWorkersMeasureOnlyTheirPlan: a job edited in the database to aim
// at another address, and one whose plan was edited after its jobs were
// queued, are refused with their reason, and nothing is sent to the
// address no plan named; a target too long for the queue is refused at
// plan time, before any job exists; a slow rate does not time jobs out.
func TestWorkersMeasureOnlyTheirPlan(t *testing.T) {
	ctx := context.Background()
	st, srv := postgresAndServer(t)
	udp := "udp://" + srv.Addr("udp").String()
	c := &measure.Campaign{Name: "edited", AllowSpecial: loopback, Targets: []string{udp}, Conditions: []string{"fresh"}, Repeat: 3, Timeout: time.Second,
		Rate: 2, Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "fra1"}}}}

	long := *c
	long.Targets = []string{"udp://127.0.0.1:53/" + strings.Repeat("x", 9000)}
	_, _, err := campaign.PlanCampaign(ctx, st, &long)
	require.ErrorContains(t, err, "longer than 1024 octets")
	var jobs int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_name = 'river_job'`).Scan(&jobs))
	if jobs > 0 {
		require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
		require.Zero(t, jobs, "no job exists for a plan refused")
	}

	run, _, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	elsewhere, err := net.ListenPacket("udp", "127.0.0.1:0") // the address no plan named
	require.NoError(t, err)
	defer elsewhere.Close()
	_, err = st.DB().ExecContext(ctx, `UPDATE river_job SET args = jsonb_set(args, '{task,url}', to_jsonb($1::text))
		WHERE id = (SELECT min(id) FROM river_job WHERE queue = 'vantage-fra1')`, "udp://"+elsewhere.LocalAddr().String())
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `UPDATE river_job SET args = jsonb_set(args, '{plan}', '"0000"')
		WHERE id = (SELECT max(id) FROM river_job WHERE queue = 'vantage-fra1')`)
	require.NoError(t, err)

	var log syncLog // the worker's jobs log from goroutines of their own
	w := &campaign.Worker{Store: st, Vantage: "fra1", Concurrency: 3, Drain: true, Log: &log}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, w.Run(wctx))
	require.Equal(t, campaign.WorkerStats{Stored: 1, Refused: 2}, w.Stats(), log.String())
	require.Contains(t, log.String(), "is not in run "+run.ID+"'s plan")
	require.Contains(t, log.String(), "changed after its jobs were queued")
	elsewhere.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, _, err = elsewhere.ReadFrom(make([]byte, 512))
	require.Error(t, err, "a query went to an address no plan named")
	s, err := campaign.GetStatus(ctx, st, run.ID)
	require.NoError(t, err)
	require.Equal(t, 2, s.Vantages[0].Failed)
	require.Zero(t, s.Vantages[0].Retried, "refused for good, not retried")

	// A sample the database can never take (here a constraint refuses
	// the new run's repetition 1: class 23) fails its job at once, with
	// the reason.
	again, _, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	var number int64
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT n FROM runs WHERE id = $1`, again.ID).Scan(&number))
	_, err = st.DB().ExecContext(ctx, fmt.Sprintf(`ALTER TABLE sample_cols ADD CONSTRAINT no_rep_1 CHECK (run <> %d OR rep <> 1)`, number))
	require.NoError(t, err)
	defer st.DB().ExecContext(ctx, `ALTER TABLE sample_cols DROP CONSTRAINT no_rep_1`)
	log.Reset()
	w = &campaign.Worker{Store: st, Vantage: "fra1", Concurrency: 3, Drain: true, Log: &log}
	start := time.Now()
	require.NoError(t, w.Run(wctx))
	require.Equal(t, campaign.WorkerStats{Stored: 2, Refused: 1}, w.Stats(), log.String())
	require.Contains(t, log.String(), "its sample cannot be stored")
	require.NotContains(t, log.String(), "trying again", "not retried")
	require.Less(t, time.Since(start), testutil.Scaled(30*time.Second))
	s, err = campaign.GetStatus(ctx, st, again.ID)
	require.NoError(t, err)
	require.Equal(t, 1, s.Vantages[0].Failed)
}

// syncLog is a log several goroutines write to.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *syncLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// TestCampaignInRounds plans two rounds 3 s apart: the second is queued
// at plan time as River scheduled jobs, taken only when due, each task
// stored once a round with its round in its key and sample, and the
// status reads each round's state.
func TestCampaignInRounds(t *testing.T) {
	ctx := context.Background()
	st, srv := postgresAndServer(t)
	// Targets as doxlab survey --targets-out writes them: what was
	// verified of each is kept with the plan.
	target := "udp://" + srv.Addr("udp").String()
	tf := filepath.Join(t.TempDir(), "targets.txt")
	require.NoError(t, os.WriteFile(tf, []byte("# from a survey\n"+target+"  # doq QUIC v1 ALPN doq, Retry\n"), 0o644))
	c := &measure.Campaign{Name: "rounds", AllowSpecial: loopback, TargetsFile: tf, Conditions: []string{"fresh"}, Repeat: 2,
		Timeout: 2 * time.Second, Every: 3 * time.Second, Rounds: 2, Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "fra1"}}}}
	run, plan, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	require.Equal(t, 4, plan.Vantages[0].Tasks, "2 tasks, 2 rounds")
	require.Equal(t, map[string]string{target: "doq QUIC v1 ALPN doq, Retry"}, plan.Notes)
	s, err := campaign.GetStatus(ctx, st, run.ID)
	require.NoError(t, err)
	require.Len(t, s.Rounds, 2)
	require.Equal(t, 2, s.Rounds[1].Waiting)
	require.Equal(t, "scheduled", s.Rounds[1].State(time.Now(), s.Every), "round 2 is not due yet")
	require.Equal(t, "late", s.Rounds[0].State(time.Now(), s.Every), "due, and no worker yet")
	require.Equal(t, "missed", s.Rounds[0].State(s.Planned.Add(4*time.Second), s.Every), "not done when round 2 fell due")

	w := &campaign.Worker{Store: st, Vantage: "fra1", Drain: true}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, w.Run(wctx), "drains round 2 once it is due")
	require.Equal(t, 4, w.Stats().Stored)

	rows, err := st.DB().QueryContext(ctx, `SELECT task_key, started_at, round FROM samples WHERE run_id = $1`, run.ID)
	require.NoError(t, err)
	defer rows.Close()
	rounds := map[string]int{}
	for rows.Next() {
		var key, started string
		var column int
		require.NoError(t, rows.Scan(&key, &started, &column))
		at, err := time.Parse(time.RFC3339Nano, started)
		require.NoError(t, err)
		round := key[len(key)-2:]
		require.Equal(t, round, fmt.Sprintf("r%d", column), "the round's typed column agrees with the task's key")
		rounds[round]++
		if round == "r2" {
			require.False(t, at.Before(s.Planned.Add(3*time.Second)), "round 2 measured when due, not before: %v", at.Sub(s.Planned))
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"r1": 2, "r2": 2}, rounds)
	s, err = campaign.GetStatus(ctx, st, run.ID)
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, s.Write(&out, time.Now()))
	for _, r := range s.Rounds {
		require.Equal(t, "done", r.State(time.Now(), s.Every), "round %d", r.Round)
	}
	require.Regexp(t, `2 rounds, every 3s:\n.*\n +1 .* +2 +2 +100\.0% .* done\n +2 .* done\n`, out.String())
}

// loopback opts a test's campaign into the loopback addresses its
// servers listen on: campaigns refuse special-purpose addresses unless
// allowed.
var loopback = []string{"127.0.0.0/8"}

// TestPageLoadLine: a worker's line per load names the page, protocol
// and resolver, with PLT and FCP, or the failure and its reason.
func TestPageLoadLine(t *testing.T) {
	ok := &campaign.PageLoad{Task: measure.Task{Page: "https://a.example/", Transport: "doq", URL: "quic://9.9.9.9:853"}, Status: "ok", PLTMs: 812.4, FCPMs: 301}
	require.Equal(t, "https://a.example/ doq via quic://9.9.9.9:853: PLT 812 ms, FCP 301 ms", ok.Line())
	bad := *ok
	bad.Status, bad.Error = "blocked", "the resolver's answer for a.example. A holds an address the campaign does not allow\n"
	require.Equal(t, `https://a.example/ doq via quic://9.9.9.9:853: blocked: the resolver's answer for a.example. A holds an address the campaign does not allow\x0a`, bad.Line(), "a control character is escaped, not printed")
}

// TestWorkerRoleIsLeastPrivilege: a role given what campaign grant gives
// drains its vantage point's queue, and can read no table but the
// store's it needs, change or delete no sample, run, job history or
// other table, and create nothing.
func TestWorkerRoleIsLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.StartPostgres(t)
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	srv := loopbackServer(t)
	udp := "udp://" + srv.Addr("udp").String()
	c := &measure.Campaign{Name: "roles", AllowSpecial: loopback, Targets: []string{udp}, Conditions: []string{"fresh"}, Repeat: 4, Timeout: 2 * time.Second,
		Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "fra1"}}}}
	run, _, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `CREATE ROLE w_fra1 LOGIN; CREATE TABLE secrets (v TEXT); INSERT INTO secrets VALUES ('coordinator only')`)
	require.NoError(t, err)
	require.ErrorContains(t, campaign.Grant(ctx, st, "nobody_here"), `no role "nobody_here"`)
	require.ErrorContains(t, campaign.Grant(ctx, st, "w; DROP TABLE runs"), "want a plain name")
	require.NoError(t, campaign.Grant(ctx, st, "w_fra1"))

	wdsn := strings.Replace(dsn, "doxlab@", "w_fra1@", 1)
	ws, err := store.Open(ctx, wdsn)
	require.NoError(t, err, "a worker's role opens the store without DDL")
	defer ws.Close()
	w := &campaign.Worker{Store: ws, Vantage: "fra1", Drain: true}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, w.Run(wctx))
	require.Equal(t, 4, w.Stats().Stored)
	s, err := campaign.GetStatus(ctx, st, run.ID)
	require.NoError(t, err)
	require.Equal(t, 4, s.Vantages[0].Stored)

	for _, stmt := range []string{
		`SELECT * FROM secrets`,
		`UPDATE sample_cols SET status = 'ok'`,
		`DELETE FROM sample_cols`,
		`UPDATE runs SET kind = 'x'`,
		`DELETE FROM runs`,
		`DROP TABLE sample_cols`,
		`CREATE TABLE mine (v TEXT)`,
		`TRUNCATE river_job`,
		`ALTER TABLE sample_cols ADD COLUMN x TEXT`,
	} {
		_, err := ws.DB().ExecContext(ctx, stmt)
		require.ErrorContains(t, err, "SQLSTATE 42501", stmt) // insufficient_privilege
	}
}

// TestRestartedWorkerTakesBackItsJobs: a worker killed mid-job leaves
// its jobs running. Started again under the same ID (a supervisor's
// restart), it takes them back at once, long before --rescue-after: the
// job runs again and is stored, a job whose cancel was asked is
// cancelled and one out of attempts discarded, as River's rescuer would,
// each with why among its errors; another worker's job is not touched.
func TestRestartedWorkerTakesBackItsJobs(t *testing.T) {
	ctx := context.Background()
	st, srv := postgresAndServer(t)
	c := &measure.Campaign{Name: "restart", AllowSpecial: loopback, Targets: []string{"udp://" + srv.Addr("udp").String()}, Repeat: 6, Timeout: 2 * time.Second,
		Vantages: []measure.CampaignVantage{{Vantage: measure.Vantage{Name: "fra1"}}}}
	run, _, err := campaign.PlanCampaign(ctx, st, c)
	require.NoError(t, err)
	var ids []int64
	rows, err := st.DB().QueryContext(ctx, `SELECT id FROM river_job WHERE queue = 'vantage-fra1' ORDER BY id LIMIT 4`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, 4)
	// As a killed worker leaves them: running, taken last by its ID.
	hold := func(id int64, by string, attempt int, metadata string) {
		_, err := st.DB().ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = $2, attempted_at = now(),
			attempted_by = ARRAY['fra1/other', $3], metadata = $4::jsonb WHERE id = $1`, id, attempt, by, metadata)
		require.NoError(t, err)
	}
	hold(ids[0], "fra1/a", 1, `{}`)
	hold(ids[1], "fra1/a", 1, `{"cancel_attempted_at": "2026-12-01T00:00:00Z"}`)
	hold(ids[2], "fra1/a", 10, `{}`) // maxAttempts
	hold(ids[3], "fra1/b", 1, `{}`)  // a worker still running elsewhere

	var log syncLog
	w := &campaign.Worker{Store: st, Vantage: "fra1", ID: "fra1/a", RescueAfter: time.Hour, Log: &log}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	require.Eventually(t, func() bool { return w.Stats().Stored == 3 }, 50*time.Second, 50*time.Millisecond,
		"the two tasks waiting and the one taken back")
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, log.String(), "worker fra1/a: took back 3 jobs its run before held when it stopped")

	state := func(id int64) (string, string) {
		var s, errs string
		require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT state, COALESCE(array_to_string(errors, ' '), '') FROM river_job WHERE id = $1`, id).Scan(&s, &errs))
		return s, errs
	}
	for i, want := range []string{"completed", "cancelled", "discarded", "running"} {
		s, errs := state(ids[i])
		require.Equal(t, want, s, "job %d", i)
		if i < 3 {
			require.Contains(t, errs, "taken back by worker fra1/a at its start", "job %d", i)
		} else {
			require.Empty(t, errs, "another worker's job is left as it is")
		}
	}
	rs, err := st.Rows(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	for _, r := range rs {
		if r.JobAttempt != 1 {
			require.EqualValues(t, 2, r.JobAttempt, "the job taken back, on its second attempt")
		}
	}
}

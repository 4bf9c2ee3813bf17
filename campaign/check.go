package campaign

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/doxlab/doxlab/store"
)

// A Finding of a vantage point's check: what was checked, whether it
// holds, and what was seen or what to do.
type Finding struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// MaxClockSkew is the most a vantage point's clock may differ from the
// store's: durations are measured on monotonic clocks and need no
// agreement, but samples' start times from many vantage points are
// compared, and rounds are due by the clock.
const MaxClockSkew = time.Second

// CheckVantage checks a vantage point before it measures, the way a
// worker would use it: the store reached over verified TLS, its schema
// this doxlab's, the worker's grants, the clock against the store's,
// the vantage point's queue; and, with pages, what page loads need
// (the page checker the web experiment registers).
func CheckVantage(ctx context.Context, st *store.Store, dsn, vantage string, pages bool, cfg PageLoaderConfig) []Finding {
	var out []Finding
	add := func(check string, ok bool, format string, a ...any) {
		out = append(out, Finding{check, ok, fmt.Sprintf(format, a...)})
	}
	if err := needPostgres(st); err != nil {
		add("store", false, "%v", err)
		return out
	}
	db := st.DB()
	mode := sslMode(dsn)
	var ssl bool
	var version string
	err := db.QueryRowContext(ctx, `SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false), coalesce((SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()), '')`).Scan(&ssl, &version)
	switch {
	case err != nil:
		add("store", false, "reading the connection's TLS: %v", err)
	case mode == "verify-full" && ssl:
		add("store", true, "reached over %s, the server's certificate verified against the CA and its name (sslmode=verify-full)", version)
	case ssl:
		add("store", false, "reached over %s but sslmode=%s does not verify the server: anyone on the path can pose as it; use sslmode=verify-full with sslrootcert", version, mode)
	default:
		add("store", false, "reached without TLS (sslmode=%s): the store's credentials and samples cross the network in clear; use sslmode=verify-full", mode)
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil {
		add("schema", false, "reading the store's schema: %v", err)
	} else {
		add("schema", v == store.SchemaVersion, "the store's schema %d, this doxlab's %d", v, store.SchemaVersion)
	}
	var missing []string
	for _, g := range []struct{ table, priv string }{
		{"runs", "SELECT"}, {"sample_cols", "INSERT"}, {"results", "INSERT"}, {"river_job", "UPDATE"},
	} {
		var ok bool
		if err := db.QueryRowContext(ctx, `SELECT has_table_privilege(current_user, $1, $2)`, g.table, g.priv).Scan(&ok); err != nil || !ok {
			missing = append(missing, g.priv+" on "+g.table)
		}
	}
	if len(missing) > 0 {
		add("grants", false, "the role lacks %v: doxlab campaign grant ROLE, as the store's owner", missing)
	} else {
		add("grants", true, "the role may read plans, add samples and page loads, and work the queue")
	}
	var dbNow time.Time
	before := time.Now()
	if err := db.QueryRowContext(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		add("clock", false, "reading the store's clock: %v", err)
	} else {
		after := time.Now()
		mid := before.Add(after.Sub(before) / 2)
		skew := mid.Sub(dbNow)
		add("clock", skew.Abs() <= MaxClockSkew+after.Sub(before)/2, "%v from the store's clock (within %v: run chrony or systemd-timesyncd)", skew.Round(time.Millisecond), MaxClockSkew)
	}
	var waiting, planned int
	err = db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state IN ('available', 'scheduled', 'retryable', 'pending')), count(*) FROM river_job WHERE kind = $1 AND queue = $2`,
		jobKind, QueueName(vantage)).Scan(&waiting, &planned)
	if err != nil {
		add("queue", false, "reading the queue %s: %v", QueueName(vantage), err)
	} else {
		add("queue", planned > 0, "%d jobs planned for %s, %d waiting", planned, vantage, waiting)
	}
	if pages {
		pageCheckMu.Lock()
		f := pageCheck
		pageCheckMu.Unlock()
		if f == nil {
			add("pages", false, "no page checker is registered")
		} else {
			out = append(out, f(cfg)...)
		}
	}
	return out
}

// sslMode is the sslmode a connection to dsn was made with, as pgx and
// libpq take it: the DSN's, else $PGSSLMODE's, else prefer.
func sslMode(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Query().Get("sslmode") != "" {
		return u.Query().Get("sslmode")
	}
	return cmp.Or(os.Getenv("PGSSLMODE"), "prefer")
}

var (
	pageCheckMu sync.Mutex
	pageCheck   func(PageLoaderConfig) []Finding
)

// RegisterPageCheck makes f what CheckVantage runs for page loads; the
// web experiment registers it with its loader.
func RegisterPageCheck(f func(PageLoaderConfig) []Finding) {
	pageCheckMu.Lock()
	defer pageCheckMu.Unlock()
	pageCheck = f
}

// WriteFindings prints findings a line each, and says whether all hold.
func WriteFindings(w io.Writer, fs []Finding) bool {
	all := true
	for _, f := range fs {
		mark := "ok  "
		if !f.OK {
			mark, all = "FAIL", false
		}
		fmt.Fprintf(w, "%s %-8s %s\n", mark, f.Check, f.Detail)
	}
	return all
}

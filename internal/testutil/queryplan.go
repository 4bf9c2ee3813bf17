package testutil

import (
	"database/sql"
	"strings"
	"testing"
)

// QueryPlan is SQLite's plan for q with args (EXPLAIN QUERY PLAN), its
// steps' details joined by "; ": what a test asserts an index is used
// for, or a sort is not.
func QueryPlan(t testing.TB, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatalf("planning %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/store"
)

// TestRedactHidesEverySecret: a store's name is printed in errors and
// hints, so its password goes, wherever the URL carries it: the user
// part (whatever characters the password holds) and the query's
// password= and sslpassword=; the rest, and a SQLite path, stay.
func TestRedactHidesEverySecret(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://doxlab:s3cret@db:5432/x?sslmode=disable":      "postgres://doxlab:***@db:5432/x?sslmode=disable",
		"postgres://doxlab:p@ss?w/rd@db/x":                        "postgres://doxlab:***@db/x",
		"postgresql://doxlab@db/x?password=s3cret&sslmode=verify": "postgresql://doxlab@db/x?password=***&sslmode=verify",
		"postgres://db/x?sslmode=require&SSLPassword=k3y":         "postgres://db/x?sslmode=require&sslpassword=***",
		"postgres://doxlab@db/x":                                  "postgres://doxlab@db/x",
		"/var/lib/doxlab/store.db":                                "/var/lib/doxlab/store.db",
	} {
		got := store.Redact(in)
		require.Equal(t, want, got, in)
		require.NotContains(t, got, "s3cret")
	}
}

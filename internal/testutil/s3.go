package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// S3 is a running S3-compatible object store: Versity's gateway
// (versitygw) over a directory, where a bucket is a directory of Root
// and an object a file under it.
type S3 struct {
	Endpoint       string // http://127.0.0.1:PORT
	Root           string
	Access, Secret string
}

// StartS3 starts versitygw's POSIX gateway, built from the Go module proxy
// (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0), with
// one bucket, "datasets".
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := Need(t, "versitygw", "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0", filepath.Join(os.Getenv("HOME"), "go", "bin", "versitygw"))
	s := &S3{Root: t.TempDir(), Access: "doxlab-test", Secret: "doxlab-test-secret"}
	must(t, os.Mkdir(filepath.Join(s.Root, "datasets"), 0o755))
	port := FreePort(t)
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	Start(t, t.TempDir(), bin, "--access", s.Access, "--secret", s.Secret, "--port", fmt.Sprintf("127.0.0.1:%d", port), "posix", "--nometa", s.Root)
	WaitListen(t, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	return s
}

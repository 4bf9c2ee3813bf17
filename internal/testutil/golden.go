package testutil

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"
)

// Projected checks that what project writes of each line of the gzip
// file name (a record per line) has the digest digests gives for
// version: a projection whose version says which readers may take its
// output in place of the records (points in a dataset) must not change
// under one version. A change fails with the digest to add under the
// next version.
func Projected(t testing.TB, name, version string, digests map[string]string, project func(w io.Writer, line []byte)) {
	t.Helper()
	f, err := os.Open(name)
	must(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	must(t, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<22)
	h := sha256.New()
	n := 0
	for sc.Scan() {
		project(h, sc.Bytes())
		n++
	}
	must(t, sc.Err())
	if n == 0 {
		t.Fatalf("%s holds no records", name)
	}
	got := hex.EncodeToString(h.Sum(nil))
	want, ok := digests[version]
	switch {
	case !ok:
		t.Fatalf("%q has no digest: add it with %s", version, got)
	case want != got:
		t.Fatalf("what %d records of %s project to changed under %q (digest %s, was %s): bump the version and add its digest", n, name, version, got, want)
	}
}

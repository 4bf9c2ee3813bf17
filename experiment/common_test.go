package experiment_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

var decodeKind = store.NewKind("test-decode")

// TestDecodeResultsKeepsTheOrder: results decoded on every core come to
// fn in the order stored, across batches; a record that does not decode
// stops the read with its error, as does fn's.
func TestDecodeResultsKeepsTheOrder(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "r", Kind: "test", StartedAt: time.Unix(0, 0)}))
	const n = 1300 // two batches and a part
	for i := range n {
		require.NoError(t, st.WriteResult(ctx, "r", decodeKind, fmt.Sprint(i), time.Unix(int64(i), 0), i))
	}
	atoi := func(_ string, raw []byte) (int, error) { return strconv.Atoi(string(raw)) }
	var got []int
	require.NoError(t, experiment.DecodeResults(ctx, st, "", decodeKind, atoi, func(_ string, x int) error {
		got = append(got, x)
		return nil
	}))
	require.Len(t, got, n)
	for i, x := range got {
		require.Equal(t, i, x, "in the order stored")
	}
	bad := errors.New("bad record")
	err = experiment.DecodeResults(ctx, st, "", decodeKind, func(_ string, raw []byte) (int, error) {
		if string(raw) == "700" {
			return 0, bad
		}
		return strconv.Atoi(string(raw))
	}, func(string, int) error { return nil })
	require.ErrorIs(t, err, bad)
	seen := 0
	stop := errors.New("enough")
	err = experiment.DecodeResults(ctx, st, "", decodeKind, atoi, func(string, int) error {
		if seen++; seen == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, seen)

	// The reading, a batch ahead, has returned when the decoding does:
	// told to stop by its function's error when fn failed, and its own
	// error is DecodeEach's.
	returned, told := false, error(nil)
	err = experiment.DecodeEach(func(f func(string, []byte) error) error {
		defer func() { returned = true }()
		for i := range 10 * n { // more than the batches it may read ahead
			if told = f("r", []byte(strconv.Itoa(i))); told != nil {
				return told
			}
		}
		return nil
	}, atoi, func(_ string, x int) error {
		if x == 5 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.True(t, returned)
	require.Error(t, told)
	disk := errors.New("disk")
	err = experiment.DecodeEach(func(f func(string, []byte) error) error {
		for i := range 600 {
			if err := f("r", []byte(strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return disk
	}, atoi, func(string, int) error { return nil })
	require.ErrorIs(t, err, disk)
}

// TestDecodeEachInOrderWhateverFinishesFirst: batches are decoded by
// whichever core is free, so a later one may be decoded first (here the
// first is slow); fn still has them in order, and no decoding runs on
// once DecodeEach has returned, a failure's or not.
func TestDecodeEachInOrderWhateverFinishesFirst(t *testing.T) {
	const n = 8000 // sixteen batches, more than are read ahead
	each := func(f func(string, []byte) error) error {
		for i := range n {
			if err := f("r", []byte(strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}
	var running, started atomic.Int64
	slowFirst := func(_ string, raw []byte) (int, error) {
		running.Add(1)
		defer running.Add(-1)
		started.Add(1)
		x, err := strconv.Atoi(string(raw))
		if x < 20 {
			time.Sleep(time.Millisecond)
		}
		return x, err
	}
	var got []int
	require.NoError(t, experiment.DecodeEach(each, slowFirst, func(_ string, x int) error {
		got = append(got, x)
		return nil
	}))
	require.Equal(t, int64(0), running.Load())
	require.Len(t, got, n)
	for i, x := range got {
		require.Equal(t, i, x, "in the order read")
	}
	stop := errors.New("enough")
	started.Store(0)
	err := experiment.DecodeEach(each, slowFirst, func(_ string, x int) error {
		if x == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, int64(0), running.Load(), "no decoding runs on")
	was := started.Load()
	time.Sleep(10 * time.Millisecond)
	require.Equal(t, was, started.Load(), "nor starts")
	require.Less(t, was, int64(n), "nor was everything decoded")
}

// TestWriteChainReachesItsSize: a small chain is one ECDSA certificate;
// a large one grows by intermediates until its DER octets reach the
// target (what the amplification experiment needs past QUIC's 3× limit).
// Both load as a TLS key pair for the names the server answers as, and
// the octets said are the chain's.
func TestWriteChainReachesItsSize(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []string{"small", "large"} {
		certFile, keyFile, octets, err := experiment.WriteChain(dir, size, 6000)
		require.NoError(t, err)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err, size)
		der := 0
		for _, c := range pair.Certificate {
			der += len(c)
		}
		require.Equal(t, der, octets, size)
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		require.NoError(t, err)
		require.NoError(t, leaf.VerifyHostname("localhost"))
		require.NoError(t, leaf.VerifyHostname(size+".doxlab.test"))
		if size == "small" {
			require.Len(t, pair.Certificate, 1)
			require.Less(t, octets, 1200, "one datagram's worth")
		} else {
			require.GreaterOrEqual(t, octets, 6000)
			require.Greater(t, len(pair.Certificate), 1)
		}
	}
	_, _, _, err := experiment.WriteChain(dir, "medium", 0)
	require.ErrorContains(t, err, `certificate size "medium" is not small or large`)
}

// TestSummaryFileIsInTheCache: a dataset file's summary is named by its
// digest inside the cache, one per kind; a manifest's digest that is no
// digest (a hostile dataset's "../../x", which once had a report write
// outside the cache) or none names no file, and DOXLAB_CACHE=off none.
func TestSummaryFileIsInTheCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOXLAB_CACHE", dir)
	digest := strings.Repeat("0123456789abcdef", 4)
	p := experiment.SummaryFile("dns-rtt/cells", "cells", store.DatasetFile{SHA256: digest})
	require.Equal(t, dir, filepath.Dir(p))
	require.True(t, strings.HasPrefix(filepath.Base(p), digest+"-"), p)
	require.NotEqual(t, p, experiment.SummaryFile("web/points", "cells", store.DatasetFile{SHA256: digest}), "a kind's own")
	for _, bad := range []string{"", "../../../../tmp/escaped", "/etc/x", strings.Repeat("0123456789ABCDEF", 4), digest + "/.."} {
		require.Empty(t, experiment.SummaryFile("dns-rtt/cells", "cells", store.DatasetFile{SHA256: bad}), "%q", bad)
	}
	t.Setenv("DOXLAB_CACHE", "off")
	require.Empty(t, experiment.SummaryFile("dns-rtt/cells", "cells", store.DatasetFile{SHA256: digest}))

	// Written whole: a summary is there complete or not at all, and
	// nothing else is left beside it.
	t.Setenv("DOXLAB_CACHE", dir)
	p = filepath.Join(dir, "sub", "x.cells")
	require.NoError(t, experiment.WriteFileAtomic(p, []byte("one")))
	require.NoError(t, experiment.WriteFileAtomic(p, []byte("two")))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	left, err := os.ReadDir(filepath.Dir(p))
	require.NoError(t, err)
	require.Len(t, left, 1, "no temporary file left")
}

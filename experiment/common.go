package experiment

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// StartServer starts doxlab's server inside the net's server host: its
// listeners' sockets are made there. The caller closes it.
func StartServer(n Net, cfg *server.Config) (*server.Server, error) {
	return StartServerIn(n, "server", cfg)
}

// StartServerIn starts doxlab's server inside a host of the net.
func StartServerIn(n Net, host string, cfg *server.Config) (*server.Server, error) {
	srv, err := server.StartIn(cfg, func(f func() error) error { return n.Run(host, f) })
	if err != nil {
		return nil, fmt.Errorf("starting the server in the %s's %s: %w", n.Kind(), host, err)
	}
	return srv, nil
}

// DefaultSelf sets an empty binary path to this program's, which the
// experiments run inside testbed hosts.
func DefaultSelf(path *string) error {
	if *path != "" {
		return nil
	}
	self, err := os.Executable()
	*path = self
	return err
}

// LoadResults decodes the stored results of one kind from the runs keep
// accepts, in the order stored. keep is called from several goroutines
// (OfRun's and OfExperiment's may be).
func LoadResults[T any](ctx context.Context, st *store.Store, kind store.Kind, keep func(runID string) bool) ([]*T, error) {
	var out []*T
	err := DecodeResults(ctx, st, "", kind, func(id string, raw []byte) (*T, error) {
		if !keep(id) {
			return nil, nil
		}
		v := new(T)
		return v, json.Unmarshal(raw, v)
	}, func(_ string, v *T) error {
		if v != nil {
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// decodeBatch is how many records DecodeResults decodes at once.
const decodeBatch = 512

// DecodeResults hands fn the stored results of one kind from the runs
// whose ID starts with prefix, each decoded, in the order stored. Records
// are decoded on every core a batch at a time, while the next batch is
// read: a page load's JSON costs more to decode than to read.
func DecodeResults[T any](ctx context.Context, st *store.Store, prefix string, kind store.Kind, decode func(runID string, raw []byte) (T, error), fn func(runID string, x T) error) error {
	return DecodeEach(func(f func(runID string, raw []byte) error) error { return st.Results(ctx, prefix, kind, f) }, decode, fn)
}

// errStopped ends DecodeEach's reading when its decoding has failed.
var errStopped = errors.New("decoding stopped")

// DecodeEach is DecodeResults of the records each hands its function
// (st.StoredResults of some runs, say). each runs on a goroutine of its
// own, batches ahead of the decoding (reading half a million page loads
// is a third of their time: unpacking, SQLite's overflow pages); a
// batch is decoded whole by whichever core is free, so that a core the
// reader shares does not hold the others up, and fn is handed the
// batches in order. each and every decoding have returned when
// DecodeEach does.
func DecodeEach[T any](each func(func(runID string, raw []byte) error) error, decode func(runID string, raw []byte) (T, error), fn func(runID string, x T) error) error {
	type rec struct {
		id  string
		raw []byte
		x   T
		err error
	}
	type batch struct {
		recs    []rec
		decoded chan struct{}
	}
	workers := runtime.GOMAXPROCS(0)
	todo := make(chan *batch, workers)    // to decode, by any worker
	order := make(chan *batch, workers+1) // the same batches, in order, for fn
	stop := make(chan struct{})
	var readErr error // set before order closes
	go func() {
		defer close(order)
		defer close(todo)
		send := func(recs []rec) bool {
			b := &batch{recs, make(chan struct{})}
			select {
			case order <- b:
			case <-stop:
				return false
			}
			todo <- b // the workers never wait: it drains
			return true
		}
		recs := make([]rec, 0, decodeBatch)
		readErr = each(func(id string, raw []byte) error {
			if recs = append(recs, rec{id: id, raw: raw}); len(recs) == decodeBatch {
				if !send(recs) {
					return errStopped
				}
				recs = make([]rec, 0, decodeBatch)
			}
			return nil
		})
		if readErr == nil && len(recs) > 0 {
			send(recs)
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range todo {
				for i := range b.recs {
					r := &b.recs[i]
					r.x, r.err = decode(r.id, r.raw)
				}
				close(b.decoded)
			}
		})
	}
	defer func() {
		close(stop)
		for range order { // until the reader has returned
		}
		wg.Wait()
	}()
	for b := range order {
		<-b.decoded
		for _, r := range b.recs {
			if r.err != nil {
				return r.err
			}
			if err := fn(r.id, r.x); err != nil {
				return err
			}
		}
	}
	return readErr
}

// OfExperiment keeps the runs of one experiment (its ID is their prefix).
func OfExperiment(expID string) func(string) bool {
	return func(id string) bool { return strings.HasPrefix(id, expID) }
}

// OfRun keeps one run exactly: "-4g" is a prefix of "-4g-medium".
func OfRun(runID string) func(string) bool {
	return func(id string) bool { return id == runID }
}

// WriteChain writes a certificate chain and key: "small" is one ECDSA
// P-256 certificate; "large" an RSA-4096 leaf followed by RSA-2048
// intermediates until the chain's DER reaches target octets. The client
// does not verify it: only its size matters here.
func WriteChain(dir, size string, target int) (certFile, keyFile string, octets int, err error) {
	tmpl := func(cn string, serial int64) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: []string{"doxlab amplification experiment"}},
			DNSNames: []string{"localhost", cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	}
	var leaf crypto.Signer
	switch size {
	case "small":
		leaf, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "large":
		leaf, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		return "", "", 0, fmt.Errorf("certificate size %q is not small or large", size)
	}
	if err != nil {
		return "", "", 0, err
	}
	cn := size + ".doxlab.test"
	der, err := x509.CreateCertificate(rand.Reader, tmpl(cn, 1), tmpl(cn, 1), leaf.Public(), leaf)
	if err != nil {
		return "", "", 0, err
	}
	certs := [][]byte{der}
	b, _ := x509.MarshalPKCS8PrivateKey(leaf)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b})
	if size == "large" {
		ik, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return "", "", 0, err
		}
		for i := int64(2); chainOctets(certs) < target; i++ {
			cn := fmt.Sprintf("intermediate-%d.doxlab.test", i)
			der, err := x509.CreateCertificate(rand.Reader, tmpl(cn, i), tmpl(cn, i), &ik.PublicKey, ik)
			if err != nil {
				return "", "", 0, err
			}
			certs = append(certs, der)
		}
	}
	var chain strings.Builder
	for _, der := range certs {
		chain.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	certFile, keyFile = filepath.Join(dir, size+".pem"), filepath.Join(dir, size+".key")
	if err := os.WriteFile(certFile, []byte(chain.String()), 0o644); err != nil {
		return "", "", 0, err
	}
	return certFile, keyFile, chainOctets(certs), os.WriteFile(keyFile, keyPEM, 0o600)
}

func chainOctets(certs [][]byte) (n int) {
	for _, c := range certs {
		n += len(c)
	}
	return n
}

// EachProfile runs f once per access profile, on the client host's link
// set to it, as run expID-PROFILE of kind ("experiment:NAME") between
// link checks (CheckedRun). It stops at the first error or when ctx
// ends.
func (e *Env) EachProfile(ctx context.Context, st *store.Store, n Net, expID, kind string, profiles []testbed.Profile, spec map[string]any,
	f func(p testbed.Profile, runID string) error) error {
	for _, p := range profiles {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := maps.Clone(spec)
		s["experiment"], s["profile"] = expID, p
		if err := e.CheckedRun(ctx, st, n, expID+"-"+p.Name, kind, p, s, func(runID string) error { return f(p, runID) }); err != nil {
			return err
		}
	}
	return nil
}

// Again is the suffix of the run that measures a run again.
const Again = "-again"

// CheckedRun runs f as run runID on the client's link set to p, with a
// link check before and after (CheckLink). The run is recorded, unless a
// resumed experiment recorded it already, with spec: the report reads
// the link from there. When a check failed, the run is measured once
// more, as runID+Again, and the first marked superseded (it stays in the
// store; analysis reads the second): a run on a link that misbehaved for
// a moment need not cost its verdicts. Whatever the second's checks say
// stands. A resumed run that was superseded continues in its second.
func (e *Env) CheckedRun(ctx context.Context, st *store.Store, n Net, runID, kind string, p testbed.Profile, spec map[string]any, f func(runID string) error) error {
	again, err := st.SupersededBy(ctx, runID)
	if err != nil {
		return err
	}
	if again == "" {
		if err := e.BeginRun(ctx, st, runID, kind, p.Name, spec); err != nil {
			return err
		}
		failed, err := e.checked(ctx, st, n, runID, p, f)
		if err != nil || failed == "" {
			return err
		}
		again = runID + Again
		fmt.Fprintf(e.Log, "%s: %s; measuring it again once, as %s\n", runID, failed, again)
		spec = maps.Clone(spec)
		spec["again_of"] = runID
		if err := e.BeginRun(ctx, st, again, kind, p.Name, spec); err != nil {
			return err
		}
		// Marked before it is measured: a resume continues in it.
		if err := st.Supersede(ctx, runID, again, failed); err != nil {
			return err
		}
	} else if err := e.BeginRun(ctx, st, again, kind, p.Name, spec); err != nil { // a resume: its design is checked
		return err
	}
	_, err = e.checked(ctx, st, n, again, p, f)
	return err
}

// checked runs f as run runID (begun) between two link checks, and says
// which of them failed, and why ("" when both held). A run that had
// nothing left to measure (a finished one resumed) stores no check and
// fails none.
func (e *Env) checked(ctx context.Context, st *store.Store, n Net, runID string, p testbed.Profile, f func(runID string) error) (string, error) {
	if err := n.SetProfile("client", p); err != nil { // anew: a run may have changed it
		return "", err
	}
	bookkeeping := []store.Kind{KindLinkCheck, store.KindSupersedes, ForcedKind}
	had, err := st.Measured(ctx, runID, bookkeeping...)
	if err != nil {
		return "", err
	}
	before := checkLink(ctx, n, runID, "before", p, nil)
	cross := crossMeter(n)
	if err := f(runID); err != nil {
		// What was measured stays, and so does the check it followed.
		return "", errors.Join(err, storeLinkCheck(ctx, st, before))
	}
	has, err := st.Measured(ctx, runID, bookkeeping...)
	if err != nil {
		return "", err
	}
	if has == had {
		// Nothing was left to measure (a finished run resumed): the link
		// vouches for nothing, and a check that failed now must not have
		// a whole run measured again.
		return "", nil
	}
	if err := storeLinkCheck(ctx, st, before); err != nil {
		return "", err
	}
	after, err := CheckLink(ctx, st, n, runID, "after", p, cross())
	if err != nil {
		return "", err
	}
	var failed []string
	if !before.OK {
		failed = append(failed, "the link check before it failed ("+before.Why+")")
	}
	if !after.OK {
		failed = append(failed, "the link check after it failed ("+after.Why+")")
	}
	return strings.Join(failed, "; "), nil
}

// summaryPut bounds the wait for the store's lock when a summary is
// kept: a report beside a campaign that writes does not wait on it.
const summaryPut = 2 * time.Second

// KeepSummary keeps data as run's summary of kind, of what it holds, if
// it can: a summary not kept (a read-only role, the store's lock held
// past a bounded wait) is only read again next time; the error says why,
// for a caller that keeps summaries for their own sake (store seal).
func KeepSummary(ctx context.Context, st *store.Store, kind, run string, held store.Held, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, summaryPut)
	defer cancel()
	return st.PutSummary(ctx, kind, run, store.Summary{Held: held, Data: data})
}

// CellCache is where the summaries of a dataset's files are kept (a
// dataset in object storage is never written to): $DOXLAB_CACHE if set
// ("off": nowhere), else doxlab/cells in the user's cache directory
// ($XDG_CACHE_HOME, ~/.cache). Safe to delete: a summary not found is
// made again from the file.
func CellCache() string {
	if d, ok := os.LookupEnv("DOXLAB_CACHE"); ok {
		if d == "off" {
			return ""
		}
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "doxlab", "cells")
}

// SummaryFile is where the summary of kind of a dataset's file df is
// kept in CellCache, with extension ext: under the file's digest, which
// the manifest gives and no rewrite keeps; "" where none is kept, or
// the manifest gives no digest.
func SummaryFile(kind, ext string, df store.DatasetFile) string {
	dir := CellCache()
	if dir == "" || !store.IsDigest(df.SHA256) { // a hostile manifest's "../x" names no place here
		return ""
	}
	k := sha256.Sum256([]byte(kind))
	return filepath.Join(dir, fmt.Sprintf("%s-%x.%s", df.SHA256, k[:6], ext))
}

// WriteFileAtomic writes b to p whole or not at all, as two reports may
// write one summary at once.
func WriteFileAtomic(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".cells-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

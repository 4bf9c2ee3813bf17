package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"
)

// Exported says what an export to a dataset added.
type Exported struct {
	Runs, Samples, Results int64 // added (a sample counted once, with its record whole)
	Known                  int64 // left out: the dataset held them already
	Files                  int
	Octets                 int64
	Orphans                int // files a failed export left, removed
	// samples and results are the keys the dataset holds now, written or
	// known, by run (samples) and by run and kind (results): what an
	// archive deletes from the store.
	samples map[string][]string
	results map[[2]string][]string
}

// Moved says whether the dataset holds anything an archive deletes from
// the store: a sample or a result, written now or before.
func (x *Exported) Moved() bool {
	return len(x.samples) > 0 || len(x.results) > 0
}

// String says what an export added, in a line.
func (x *Exported) String() string {
	s := fmt.Sprintf("added %d runs, %d samples and %d results in %d files of %d octets", x.Runs, x.Samples, x.Results, x.Files, x.Octets)
	if x.Known > 0 {
		s += fmt.Sprintf("; %d it held already", x.Known)
	}
	if x.Orphans > 0 {
		s += fmt.Sprintf("; removed %d files a failed export left", x.Orphans)
	}
	return s
}

// ExportDataset adds what f selects, of what started before before (all
// if zero), to the dataset in dir (made if need be): new files only,
// then the manifest. What the dataset holds already, by key, is left
// out, so an export after each round adds only the new. One export
// writes to a dataset at a time.
func (s *Store) ExportDataset(ctx context.Context, dir string, f Filter, before time.Time) (*Exported, error) {
	w, err := openWriter(dir)
	if err != nil {
		return nil, err
	}
	defer w.unlock()
	if err := w.export(ctx, s, f, before); err != nil {
		w.abort()
		return nil, err
	}
	if err := w.commit(); err != nil {
		return nil, err
	}
	return &w.Exported, nil
}

// writer adds files to a dataset.
type writer struct {
	d     *Dataset
	stamp string
	seq   *atomic.Int64    // numbers the files, across shards
	open  map[string]*part // by partition
	lru   []string
	known map[string]map[string]bool // keys the dataset holds, by partition, read when first needed
	runs  map[string]bool            // the dataset's runs
	// archive keeps the keys the dataset holds of what was read, for
	// Archive to delete (about 70 octets a sample in memory).
	archive bool
	added   []DatasetFile
	maxOpen int // files open at once
	// rowDerivers make the tables derived from each samples file.
	rowDerivers []rowDeriver
	Exported
}

// maxOpen is how many files an export writes at once, its shards' in
// all; a partition it comes back to after gets a file more.
const maxOpen = 32

func openWriter(dir string) (*writer, error) {
	if strings.HasPrefix(dir, "s3://") {
		return nil, fmt.Errorf("dataset %s: written to a directory only: export there, then copy it to the bucket whole (aws s3 sync, rclone copy)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	lock := filepath.Join(dir, lockName)
	l, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("dataset %s: another export is writing it (or one was killed: then remove %s)", dir, lock)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	fmt.Fprintf(l, "%d\n", os.Getpid())
	l.Close()
	w := &writer{stamp: newStamp(), seq: new(atomic.Int64), open: map[string]*part{}, known: map[string]map[string]bool{}, runs: map[string]bool{},
		maxOpen: maxOpen, Exported: Exported{samples: map[string][]string{}, results: map[[2]string][]string{}}}
	d, err := OpenDataset(context.Background(), dir)
	if err != nil {
		entries, _ := os.ReadDir(dir)
		if slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() != lockName }) {
			os.Remove(lock)
			return nil, fmt.Errorf("%w (and the directory is not empty: export a dataset to a new one)", err)
		}
		d = &Dataset{dir: dir, src: dirSource(dir), m: newManifest()}
	}
	w.d = d
	runs, err := d.Runs()
	if err != nil {
		os.Remove(lock)
		return nil, err
	}
	for _, r := range runs {
		w.runs[r.ID] = true
	}
	if w.Orphans, err = removeOrphans(d); err != nil {
		os.Remove(lock)
		return nil, err
	}
	return w, nil
}

func (w *writer) unlock() { os.Remove(filepath.Join(w.d.dir, lockName)) }

// removeOrphans removes the files no manifest names: an export that
// died left them (none other writes while the lock is held), and an
// engine globbing the dataset would read them.
func removeOrphans(d *Dataset) (int, error) {
	listed := map[string]bool{manifestName: true, lockName: true}
	for _, f := range d.m.Files {
		listed[f.Path] = true
	}
	n := 0
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(d.dir, p)
		rel = filepath.ToSlash(rel)
		if listed[rel] || !(strings.HasPrefix(e.Name(), ".tmp-") || strings.HasSuffix(rel, ".parquet") || strings.HasSuffix(rel, ".jsonl.zst") || strings.HasSuffix(rel, derivedExt)) {
			return nil
		}
		n++
		return os.Remove(p)
	})
	return n, err
}

// file is the open file of a partition, made when none is.
func (w *writer) file(table string, kind Kind, run, vantage, day string) (*part, error) {
	dir := partitionDir(table, kind, run, vantage, day)
	if p := w.open[dir]; p != nil {
		if i := slices.Index(w.lru, dir); i >= 0 {
			w.lru = append(slices.Delete(w.lru, i, i+1), dir)
		}
		return p, nil
	}
	if len(w.open) >= w.maxOpen {
		if err := w.closeFile(w.lru[0]); err != nil {
			return nil, err
		}
	}
	seq := w.seq.Add(1)
	ext := ".jsonl.zst"
	if table == TableSamples {
		ext = ".parquet"
	}
	f := &DatasetFile{Path: path.Join(dir, fmt.Sprintf("part-%s-%d%s", w.stamp, seq, ext)), Table: table, Kind: kind, Run: run, Vantage: vantage, Day: day}
	p, err := w.d.create(f)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if b := briefFor(kind); table == TableResults && b != nil {
		bf := &DatasetFile{Path: path.Join(partitionDir(TableBriefs, kind, run, "", day), path.Base(f.Path)), Table: TableBriefs, Kind: kind, Run: run, Day: day, Of: f.Path, Brief: b.hexHead()}
		if p.brief, err = w.d.create(bf); err != nil {
			p.abort()
			return nil, fmt.Errorf("dataset: %w", err)
		}
		p.brief.of = b
	}
	if table == TableResults {
		for _, d := range derivedFor(kind) {
			p.derived = append(p.derived, newDeriving(d, run))
		}
	}
	if table == TableSamples {
		for _, rd := range w.rowDerivers {
			add, end := rd.New(run)
			p.rowDerived = append(p.rowDerived, rowDeriving{made{rd.Table, rd.Format, end}, add})
		}
	}
	w.open[dir] = p
	w.lru = append(w.lru, dir)
	return p, nil
}

func (w *writer) closeFile(dir string) error {
	p := w.open[dir]
	delete(w.open, dir)
	w.lru = slices.DeleteFunc(w.lru, func(x string) bool { return x == dir })
	defer p.endDerived() // a file that failed leaves none behind running
	for _, q := range []*part{p, p.brief} {
		if q == nil {
			continue
		}
		if err := q.close(w.d.dir); err != nil {
			if q == p && p.brief != nil {
				p.brief.abort()
			}
			return err
		}
		w.add(q.file)
	}
	ds, err := w.writeDerived(p.file, p.made())
	for _, f := range ds {
		w.add(f)
	}
	return err
}

// add lists a file written in the manifest to be.
func (w *writer) add(f *DatasetFile) {
	f.Written = time.Now().UTC()
	w.added = append(w.added, *f)
	w.Files++
	w.Octets += f.Octets
}

// isKnown says whether the dataset holds key in a partition already,
// reading the partition's keys the first time it is asked.
func (w *writer) isKnown(table string, kind Kind, run, vantage, day, key string) (bool, error) {
	dir := partitionDir(table, kind, run, vantage, day)
	keys, ok := w.known[dir]
	if !ok {
		keys = map[string]bool{}
		for _, f := range w.d.m.Files {
			if f.partition() != dir {
				continue
			}
			if err := w.d.keys(f, keys); err != nil {
				return false, err
			}
		}
		w.known[dir] = keys
	}
	return keys[key], nil
}

// keys adds the keys of a file to set.
func (d *Dataset) keys(f DatasetFile, set map[string]bool) error {
	if err := d.fileKeys(f, set); err != nil {
		return fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
	}
	return nil
}

func (d *Dataset) fileKeys(f DatasetFile, set map[string]bool) (err error) {
	defer damaged(&err)
	if f.Table != TableSamples {
		return d.eachLine(f, func(line []byte) error {
			var r struct{ Key string }
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			set[r.Key] = true
			return nil
		})
	}
	file, err := d.src.open(context.Background(), f.Path)
	if err != nil {
		return err
	}
	defer file.Close()
	pf, err := parquet.OpenFile(file, file.Size())
	if err != nil {
		return err
	}
	type keyed struct {
		Key string `parquet:"key"`
	}
	r := parquet.NewGenericReader[keyed](pf)
	defer r.Close()
	buf := make([]keyed, 4096)
	for {
		n, err := r.Read(buf)
		for _, k := range buf[:n] {
			set[k.Key] = true
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// export writes what f selects started before before.
func (w *writer) export(ctx context.Context, s *Store, f Filter, before time.Time) error {
	early := func(t time.Time) bool { return before.IsZero() || t.Before(before) }
	touched := map[string]bool{}
	rd, err := beginSamplesDerived(ctx, s)
	if err != nil {
		return err
	}
	w.rowDerivers = rd
	if err := w.exportSamples(ctx, s, f, early, touched); err != nil {
		return err
	}
	if err := w.exportResults(ctx, s, f, early, touched); err != nil {
		return err
	}
	return w.exportRuns(ctx, s, touched)
}

// shardSample is a sample on its way to the shard writing its files.
type shardSample struct {
	row Row
	raw []byte
}

// shardKey is what picks a sample's shard: its run and its UTC day.
type shardKey struct {
	run string
	day int64
}

// shardBatch is how many samples a reader hands a shard at once: runs
// of a reader's rows, in its order, compress better than its rows
// interleaved with the other readers' one at a time (the scale bench's
// million samples: 6.4 MB of Parquet in batches, 9.9 MB a row at a
// time, 8.9-9.2 MB under one writer's lock).
const shardBatch = 256

// exportSamples writes the samples: each reader of the store hands its
// rows on as it reads them (no order is needed), decompressing the
// records by itself, to the shard that writes their run and day's files
// (the samples' Parquet and the records' zstd, 10 M samples' 20 GB of
// JSON), a shard a core; each shard writes its files' rows in the order
// it gets them.
func (w *writer) exportSamples(ctx context.Context, s *Store, f Filter, early func(time.Time) bool, touched map[string]bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	n := max(1, runtime.GOMAXPROCS(0))
	shards := make([]*writer, n)
	in := make([]chan []shardSample, n)
	errs := make([]error, n)
	done := make([]map[string]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		shards[i], in[i], done[i] = w.shard(n), make(chan []shardSample, 4), map[string]bool{}
		wg.Go(func() {
			sh := shards[i]
			for batch := range in[i] {
				for j := 0; j < len(batch) && errs[i] == nil; j++ {
					if errs[i] = sh.addSample(&batch[j].row, batch[j].raw, done[i]); errs[i] != nil {
						cancel(errs[i])
					}
				}
			}
			if errs[i] == nil {
				errs[i] = sh.closeAll()
			}
			sh.abortOpen()
		})
	}
	send := func(i int, batch []shardSample) error {
		select {
		case in[i] <- batch:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	seed := maphash.MakeSeed()
	var pending [][][]shardSample // each reader's batches by shard, not yet sent
	err := s.scan(ctx, f, rawColumns, nil, func() func(*Row) error {
		batches := make([][]shardSample, n)
		pending = append(pending, batches)
		return func(r *Row) error {
			if !early(r.StartedAt) {
				return nil
			}
			raw, err := unpackRaw(r.raw)
			if err != nil {
				return fmt.Errorf("store: sample %s of run %s: %w", r.Key, r.RunID, err)
			}
			// Both files' partitions are the run's and the day's: hashed
			// as they are, without a string made for them a sample.
			i := maphash.Comparable(seed, shardKey{r.RunID, r.StartedAt.Unix() / 86400}) % uint64(n)
			if batches[i] = append(batches[i], shardSample{row: r.Clone(), raw: raw}); len(batches[i]) < shardBatch {
				return nil
			}
			b := batches[i]
			batches[i] = make([]shardSample, 0, shardBatch)
			return send(int(i), b)
		}
	})
	for _, batches := range pending { // the readers are done
		for i, b := range batches {
			if err == nil && len(b) > 0 {
				err = send(i, b)
			}
		}
	}
	for _, c := range in {
		close(c)
	}
	wg.Wait()
	for i, sh := range shards {
		w.merge(sh)
		maps.Copy(touched, done[i])
	}
	return cmp.Or(errors.Join(errs...), err)
}

// shard is a writer of its own partitions' files for w, of n shards.
func (w *writer) shard(n int) *writer {
	return &writer{d: w.d, stamp: w.stamp, seq: w.seq, open: map[string]*part{}, known: map[string]map[string]bool{}, runs: w.runs,
		archive: w.archive, maxOpen: max(1, w.maxOpen/n), rowDerivers: w.rowDerivers, Exported: Exported{samples: map[string][]string{}, results: map[[2]string][]string{}}}
}

// merge adds what shard sh wrote and found to w.
func (w *writer) merge(sh *writer) {
	w.added = append(w.added, sh.added...)
	w.Samples += sh.Samples
	w.Known += sh.Known
	w.Files += sh.Files
	w.Octets += sh.Octets
	for run, keys := range sh.samples {
		w.samples[run] = append(w.samples[run], keys...)
	}
}

// addSample writes a sample's row and its record whole, unless the
// dataset holds it.
func (w *writer) addSample(r *Row, raw []byte, touched map[string]bool) error {
	d := day(r.StartedAt)
	if w.archive {
		w.samples[r.RunID] = append(w.samples[r.RunID], r.Key)
	}
	if known, err := w.isKnown(TableSamples, "", r.RunID, r.Vantage, d, r.Key); known || err != nil {
		w.Known++
		return err
	}
	p, err := w.file(TableSamples, "", r.RunID, r.Vantage, d)
	if err == nil {
		err = p.writeRow(r)
	}
	if err == nil {
		for _, rd := range p.rowDerived {
			rd.add(r)
		}
	}
	if err == nil {
		p, err = w.file(TableSampleRaw, "", r.RunID, "", d)
	}
	if err == nil {
		err = p.writeJSON(r.Key, record{Key: r.Key, StartedAt: r.StartedAt, Record: raw})
	}
	w.Samples++
	touched[r.RunID] = true
	return err
}

// exportResults writes the results f selects whose start early takes.
func (w *writer) exportResults(ctx context.Context, s *Store, f Filter, early func(time.Time) bool, touched map[string]bool) error {
	q, args := `SELECT run_id, kind, task_key, started_at, z, brief FROM results WHERE `+runPrefix, []any{len([]rune(f.RunPrefix)), f.RunPrefix}
	if !f.Superseded {
		not, more, err := s.notSuperseded(ctx)
		if err != nil {
			return err
		}
		q, args = q+not, append(args, more...)
	}
	// In the order of the kinds' index: a partition is one kind's, one
	// run's, so each still gets its rows by start, and the store hands
	// them without sorting every record first.
	rows, err := s.db.QueryContext(ctx, s.rebind(q+` ORDER BY kind, run_id, started_at, task_key`), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var run, kind, key, started string
		var z, brief []byte
		if err := rows.Scan(&run, &kind, &key, &started, &z, &brief); err != nil {
			return err
		}
		at, err := time.Parse(time.RFC3339Nano, started)
		if err != nil {
			return fmt.Errorf("store: result %s of run %s: start time %q: %w", key, run, started, err)
		}
		if !early(at) {
			continue
		}
		d := day(at)
		if w.archive {
			w.results[[2]string{run, kind}] = append(w.results[[2]string{run, kind}], key)
		}
		if known, err := w.isKnown(TableResults, Kind(kind), run, "", d, key); known || err != nil {
			w.Known++
			if err != nil {
				return err
			}
			continue
		}
		raw, err := unpackRaw(z)
		if err != nil {
			return fmt.Errorf("store: result %s of run %s: %w", key, run, err)
		}
		rec := record{Key: key, StartedAt: at.UTC(), Record: raw}
		// The brief the store keeps, where its kind's briefs are made
		// as now: the one the record would give, without reading it.
		if b := briefFor(Kind(kind)); b != nil && bytes.HasPrefix(brief, b.head) {
			if rec.brief, err = unpackRaw(brief[briefHead:]); err != nil {
				return fmt.Errorf("store: the brief of result %s of run %s: %w", key, run, err)
			}
		}
		p, err := w.file(TableResults, Kind(kind), run, "", d)
		if err == nil {
			err = p.writeJSON(key, rec)
		}
		if err != nil {
			return err
		}
		w.Results++
		touched[run] = true
	}
	return rows.Err()
}

// exportRuns writes the runs something was written of that the dataset
// does not hold.
func (w *writer) exportRuns(ctx context.Context, s *Store, touched map[string]bool) error {
	runs, err := s.dbRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if !touched[r.ID] || w.runs[r.ID] {
			continue
		}
		p, err := w.file(TableRuns, "", "", "", "")
		if err == nil {
			err = p.writeJSON(r.ID, r)
		}
		if err != nil {
			return err
		}
		w.Runs++
	}
	return nil
}

// abort removes what the export wrote: the manifest never named it.
func (w *writer) abort() {
	w.abortOpen()
	for _, f := range w.added {
		os.Remove(filepath.Join(w.d.dir, filepath.FromSlash(f.Path)))
	}
}

// abortOpen removes the files w has open.
func (w *writer) abortOpen() {
	for dir, p := range w.open {
		p.abort()
		delete(w.open, dir)
	}
	w.lru = nil
}

// closeAll ends the files w has open.
func (w *writer) closeAll() error {
	for len(w.lru) > 0 {
		if err := w.closeFile(w.lru[0]); err != nil {
			return err
		}
	}
	return nil
}

// commit ends the files and writes the manifest that names them.
func (w *writer) commit() error {
	if err := w.closeAll(); err != nil {
		w.abort()
		return err
	}
	if len(w.added) == 0 && len(w.d.m.Files) > 0 {
		return nil
	}
	m := w.d.m
	m.Files = append(slices.Clone(m.Files), w.added...)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(w.d.dir, ".tmp-"+manifestName)
	if err = os.WriteFile(tmp, append(b, '\n'), 0o644); err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(w.d.dir, manifestName))
	}
	if err != nil {
		os.Remove(tmp)
		w.abort()
		return fmt.Errorf("dataset: writing its manifest: %w", err)
	}
	w.d.m = m
	return nil
}

func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

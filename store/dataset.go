package store

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/doxlab/doxlab/internal/printable"
)

// A dataset is an archive of a store's runs in files any engine reads,
// the layout data engineers expect (Hive partitions, as OONI's and
// most pipelines' buckets):
//
//	DIR/_manifest.json                                      every file, its rows and digest
//	DIR/run_id=R/vantage=V/day=D/part-S.parquet             the samples' typed rows (Row)
//	DIR/_records/runs/part-S.jsonl.zst                      the runs
//	DIR/_records/sample_raw/run_id=R/day=D/part-S.jsonl.zst each sample whole
//	DIR/_records/results/kind=K/run_id=R/day=D/part-S.jsonl.zst every result whole
//	DIR/_records/briefs/kind=K/run_id=R/day=D/part-S.jsonl.zst  their briefs, if K's are
//
// read_parquet('DIR/**/*.parquet', hive_partitioning=true) in DuckDB and
// pandas.read_parquet(DIR) read the samples with no options: the
// partitions' columns are not in the files (pyarrow refuses a column
// twice), a sample measured outside a campaign has the vantage point "-"
// (a partition of null breaks pandas), and what begins with "_" is
// skipped by pyarrow and matched by no *.parquet glob. Records are
// JSON lines, each {"key", "started_at", "record"}, compressed with zstd
// (DuckDB's read_json and pandas read them as they are). A results file
// of a kind whose results keep a brief in a store (Brief) has a briefs
// file beside it, row for row {"key", "started_at", "brief"}: what a
// report reads of it (a page load's brief is a sixth of its 7.7 KB
// record). Its manifest entry names the results file (of) and the
// brief's head (brief); a reader whose analysis leaves out other
// members reads the results file, and so does a doxlab before briefs.
//
// Files are written under new names and never rewritten: an export adds
// files, and the manifest, replaced whole by rename, says which count.

// DatasetVersion is the version of a dataset's layout and of its samples'
// columns: a reader refuses a later one.
const DatasetVersion = 1

const (
	datasetFormat = "doxlab-dataset"
	manifestName  = "_manifest.json"
	lockName      = "_manifest.lock"
	// NoVantage is the vantage partition of samples measured outside a
	// campaign, whose vantage point is "" in a store; no vantage point
	// can be named so (measure.CheckVantageName).
	NoVantage = "-"
)

// The tables a dataset's files hold.
const (
	TableSamples   = "samples"    // Parquet, a Row each
	TableRuns      = "runs"       // JSON lines, a Run each
	TableSampleRaw = "sample_raw" // JSON lines, a sample whole each
	TableResults   = "results"    // JSON lines, a result whole each
	TableBriefs    = "briefs"     // JSON lines, a result's brief each
)

// Manifest lists a dataset's files.
type Manifest struct {
	Format       string   `json:"format"`
	Version      int      `json:"version"`
	Partitioning []string `json:"partitioning"`
	// Columns are the samples' columns in each Parquet file, by name and
	// type, the partitions' apart.
	Columns []string      `json:"columns"`
	Files   []DatasetFile `json:"files"`
}

// DatasetFile is one file of a dataset.
type DatasetFile struct {
	Path    string    `json:"path"` // from the dataset's root, with /
	Table   string    `json:"table"`
	Kind    Kind      `json:"kind,omitempty"` // of a results file
	Run     string    `json:"run_id,omitempty"`
	Vantage string    `json:"vantage,omitempty"` // of a samples file, "" outside campaigns
	Day     string    `json:"day,omitempty"`     // UTC, 2006-01-02
	Rows    int64     `json:"rows"`
	First   string    `json:"first_key,omitempty"` // the key of its first row
	Octets  int64     `json:"octets"`
	SHA256  string    `json:"sha256"`
	Written time.Time `json:"written"`
	// Of is the results file a briefs file holds the briefs of, row for
	// row, and Brief their head in hex (Brief): a reader whose
	// analysis leaves out other members reads Of itself.
	Of    string `json:"of,omitempty"`
	Brief string `json:"brief,omitempty"`
	// Format is what a derived table's file holds (Derived), made from
	// the rows of results file Of.
	Format string `json:"format,omitempty"`
}

// partition is the directory of f, which names its partition.
func (f DatasetFile) partition() string { return path.Dir(f.Path) }

// Dataset is an open dataset.
type Dataset struct {
	dir string // where it is, as given
	src source
	m   Manifest

	runsOnce sync.Once
	runs     []Run
	runsErr  error

	// made are the files made from a results file's rows (its briefs,
	// its derived tables), by the results file: read once, not a walk of
	// the manifest per results file.
	madeOnce sync.Once
	made     map[string][]DatasetFile
}

// fileSchema is the samples' Parquet schema: a Row without the columns
// its path names.
var fileSchema = func() *parquet.Schema {
	g := parquet.Group{}
	for _, f := range parquet.SchemaOf(Row{}).Fields() {
		if f.Name() != "run_id" && f.Name() != "vantage" {
			g[f.Name()] = f
		}
	}
	return parquet.NewSchema("sample", g)
}()

func newManifest() Manifest {
	m := Manifest{Format: datasetFormat, Version: DatasetVersion, Partitioning: []string{"run_id", "vantage", "day"}}
	for _, f := range fileSchema.Fields() {
		t := f.Type().String()
		if f.Optional() {
			t = "optional " + t
		}
		m.Columns = append(m.Columns, f.Name()+" "+t)
	}
	return m
}

// maxManifest is the most a manifest may take: a year of daily
// partitions lists some ten thousand files, a few MB.
const maxManifest = 256 << 20

// OpenDataset opens the dataset in a directory, or at an S3-compatible
// location, s3://BUCKET/PREFIX (newS3Source says how it is reached).
func OpenDataset(ctx context.Context, loc string) (*Dataset, error) {
	var src source = dirSource(loc)
	if strings.HasPrefix(loc, "s3://") {
		s3, err := newS3Source(loc)
		if err != nil {
			return nil, err
		}
		src = s3
	}
	dir := loc
	b, err := readAll(ctx, src, manifestName, maxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dataset %s: no %s: not a dataset, or nothing exported to it yet", dir, manifestName)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	d := &Dataset{dir: dir, src: src}
	if err := json.Unmarshal(b, &d.m); err != nil {
		return nil, fmt.Errorf("dataset %s: %s: %w", dir, manifestName, err)
	}
	switch {
	case d.m.Format != datasetFormat:
		return nil, fmt.Errorf("dataset %s: %s is not a doxlab dataset's manifest (format %q)", dir, manifestName, d.m.Format)
	case d.m.Version > DatasetVersion:
		return nil, fmt.Errorf("dataset %s: version %d, later than this doxlab's %d: upgrade doxlab", dir, d.m.Version, DatasetVersion)
	}
	for _, f := range d.m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return nil, fmt.Errorf("dataset %s: %s names %q, outside the dataset", dir, manifestName, f.Path)
		}
		// A file's digest names its summary in the reader's cache: one
		// that is no digest ("../../x") would name a path anywhere.
		if f.SHA256 != "" && !IsDigest(f.SHA256) {
			return nil, fmt.Errorf("dataset %s: %s gives %s the SHA-256 %q, which is not one (64 hexadecimal digits)", dir, manifestName, f.Path, printable.String(f.SHA256))
		}
	}
	return d, nil
}

// IsDigest says whether s is a SHA-256 as a manifest writes one: 64
// lower-case hexadecimal digits.
func IsDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Manifest is the dataset's manifest.
func (d *Dataset) Manifest() Manifest { return d.m }

// Dir is where the dataset is.
func (d *Dataset) Dir() string { return d.dir }

// files are the dataset's files of a table, in the order of their days,
// runs and vantage points, so that readers see the oldest first.
func (d *Dataset) files(table string, kind Kind) []DatasetFile {
	var out []DatasetFile
	for _, f := range d.m.Files {
		if f.Table == table && (kind == "" || f.Kind == kind) {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b DatasetFile) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Run, b.Run), cmp.Compare(a.Vantage, b.Vantage))
	})
	return out
}

// escape is a partition's value as Hive writes it (and DuckDB and
// pyarrow read it): what is not a letter, digit, '.', '_' or '-' as %XX.
func escape(v string) string {
	plain := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	i := 0
	for i < len(v) && plain(v[i]) {
		i++
	}
	if i == len(v) { // most names: an export asks twice a sample
		return v
	}
	var b strings.Builder
	b.WriteString(v[:i])
	for ; i < len(v); i++ {
		if c := v[i]; plain(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// record is a line of a records file.
type record struct {
	Key       string          `json:"key"`
	StartedAt time.Time       `json:"started_at"`
	Record    json.RawMessage `json:"record"`
	brief     []byte          // the record's brief as JSON, where the store keeps it
}

// eachMember hands fn the value of member of each line of a records
// file: its record, or its brief. Read by jsontext, which checks the
// line once as it goes (encoding/json checked a 7.7 KB line whole, then
// again as it skipped to the record: 35 s of a report's first read of
// half a million page loads, on the one goroutine that reads them).
func (d *Dataset) eachMember(f DatasetFile, member string, fn func(runID string, raw []byte) error) error {
	var r bytes.Reader
	dec := jsontext.NewDecoder(&r)
	return d.eachLine(f, func(line []byte) error {
		r.Reset(line)
		dec.Reset(&r)
		v, err := lineMember(dec, member)
		if err != nil {
			return fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
		}
		return fn(f.Run, bytes.Clone(v))
	})
}

// lineMember is the value of member of the object dec reads, valid
// until dec reads on.
func lineMember(dec *jsontext.Decoder, member string) (jsontext.Value, error) {
	if tok, err := dec.ReadToken(); err != nil {
		return nil, err
	} else if tok.Kind() != '{' {
		return nil, errors.New("a line that is no JSON object")
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if tok.String() == member {
			return dec.ReadValue()
		}
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("a line without %q", member)
}

// briefsOf is the briefs file of results file f whose briefs are made
// as f's kind's are now, of as many rows, if the dataset holds one.
func (d *Dataset) briefsOf(f DatasetFile) (DatasetFile, bool) {
	of := briefFor(f.Kind)
	b, ok := d.madeFrom(f, func(b DatasetFile) bool { return b.Table == TableBriefs })
	return b, ok && of != nil && b.Brief == of.hexHead() && b.Rows == f.Rows && b.Kind == f.Kind && b.Run == f.Run
}

// madeFrom is the file made from results file f's rows that is, if the
// dataset holds one.
func (d *Dataset) madeFrom(f DatasetFile, is func(DatasetFile) bool) (DatasetFile, bool) {
	d.madeOnce.Do(func() {
		d.made = map[string][]DatasetFile{}
		for _, x := range d.m.Files {
			if x.Of != "" {
				d.made[x.Of] = append(d.made[x.Of], x)
			}
		}
	})
	for _, x := range d.made[f.Path] {
		if is(x) {
			return x, true
		}
	}
	return DatasetFile{}, false
}

// eachLine hands fn each line of a records file.
func (d *Dataset) eachLine(f DatasetFile, fn func(line []byte) error) error {
	file, err := d.src.open(context.Background(), f.Path)
	if err != nil {
		return fmt.Errorf("dataset %s: %w", d.dir, err)
	}
	defer file.Close()
	// The file's octets are hashed as they are read (the decoder reads
	// in order: one goroutine), and checked against the manifest's
	// digest at its end, or where it fails to decode: a file changed
	// since it was written is said to be, not only that it reads wrong.
	h := sha256.New()
	zr, err := zstd.NewReader(io.TeeReader(file, h), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxRecord))
	if err != nil {
		return err
	}
	defer zr.Close()
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), maxRecord)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	err = sc.Err()
	if f.SHA256 != "" {
		if _, cerr := io.Copy(h, file); cerr == nil && hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
			changed := fmt.Errorf("dataset %s: %s: changed since it was written: its SHA-256 is not the manifest's", d.dir, f.Path)
			if err != nil {
				return fmt.Errorf("%w (reading it: %w)", changed, err)
			}
			return changed
		}
	}
	if err != nil {
		return fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
	}
	return nil
}

// Runs are the dataset's runs, oldest first.
func (d *Dataset) Runs() ([]Run, error) {
	d.runsOnce.Do(func() {
		seen := map[string]bool{}
		for _, f := range d.files(TableRuns, "") {
			d.runsErr = d.eachLine(f, func(line []byte) error {
				var r Run
				if err := json.Unmarshal(line, &r); err != nil {
					return fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
				}
				if !seen[r.ID] {
					seen[r.ID] = true
					d.runs = append(d.runs, r)
				}
				return nil
			})
			if d.runsErr != nil {
				return
			}
		}
		sortRuns(d.runs)
	})
	return d.runs, d.runsErr
}

func sortRuns(runs []Run) {
	slices.SortStableFunc(runs, func(a, b Run) int { return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID)) })
}

// results hands fn the dataset's records of one kind of the runs keep
// selects, in the order they were taken (by start, run and key), a day
// at a time.
func (d *Dataset) results(kind Kind, keep func(runID string) bool, fn func(runID string, raw []byte) error) error {
	type line struct {
		run string
		record
	}
	files := d.files(TableResults, kind)
	for len(files) > 0 {
		day := files[0].Day
		var lines []line
		for len(files) > 0 && files[0].Day == day {
			f := files[0]
			files = files[1:]
			if !keep(f.Run) {
				continue
			}
			err := d.eachLine(f, func(b []byte) error {
				var l line
				if err := json.Unmarshal(b, &l.record); err != nil {
					return fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
				}
				l.run = f.Run
				lines = append(lines, l)
				return nil
			})
			if err != nil {
				return err
			}
		}
		slices.SortStableFunc(lines, func(a, b line) int {
			return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.run, b.run), cmp.Compare(a.Key, b.Key))
		})
		for _, l := range lines {
			if err := fn(l.run, l.Record); err != nil {
				return err
			}
		}
	}
	return nil
}

// scan hands fn the samples of the runs keep selects (and of vantage, if
// set), a file at a time.
func (d *Dataset) scan(keep func(runID string) bool, vantage string, runs map[string]Run, fn func([]Row) error) error {
	buf := make([]Row, 1024)
	for _, f := range d.files(TableSamples, "") {
		if !keep(f.Run) || vantage != "" && f.Vantage != vantage {
			continue
		}
		if err := d.scanFile(f, buf, runs, fn); err != nil {
			return fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
		}
	}
	return nil
}

func (d *Dataset) scanFile(f DatasetFile, buf []Row, runs map[string]Run, fn func([]Row) error) (err error) {
	defer damaged(&err)
	file, err := d.src.open(context.Background(), f.Path)
	if err != nil {
		return err
	}
	defer file.Close()
	pf, err := parquet.OpenFile(file, file.Size())
	if err != nil {
		return err
	}
	r := parquet.NewGenericReader[Row](pf)
	defer r.Close()
	run := runs[f.Run]
	for {
		n, err := r.Read(buf)
		for i := range buf[:n] {
			x := &buf[i]
			x.RunID, x.Vantage, x.StartedAt = f.Run, f.Vantage, x.StartedAt.UTC()
			// The run's environment, as the store joins it.
			x.Kind, x.Profile, x.DoxlabVersion, x.Kernel, x.Hostname, x.Method = run.Kind, run.Profile, run.DoxlabVersion, run.Kernel, run.Hostname, int64(run.Method)
		}
		if n > 0 {
			if err := fn(buf[:n]); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// damaged makes a panic of a read of a dataset's file (parquet-go's
// readers panic at some files that are not whole) the read's error: a
// file damaged since it was written fails its read, not the program.
// The read's caller names the file.
func damaged(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%v (damaged since it was written?)", p)
	}
}

// vantages are the vantage points the dataset's samples name.
func (d *Dataset) vantages() []string {
	var out []string
	for _, f := range d.m.Files {
		if f.Table == TableSamples && f.Vantage != "" && !slices.Contains(out, f.Vantage) {
			out = append(out, f.Vantage)
		}
	}
	slices.Sort(out)
	return out
}

// newStamp names an export's files: its UTC time and 32 random bits, so
// that two exports never name a file alike.
func newStamp() string {
	b := make([]byte, 4)
	rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// hashed counts and digests what is written through it.
type hashed struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (h *hashed) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

// parquetZstd compresses every dataset file's pages: one codec, so that
// its pool of encoders (a window of history each) serves them all.
var parquetZstd = &pqzstd.Codec{Level: pqzstd.SpeedFastest}

// part is a file being written: under a temporary name until Close.
type part struct {
	file *DatasetFile
	tmp  *os.File
	out  *hashed
	pq   *parquet.GenericWriter[Row]
	rows []Row
	zw   *zstd.Encoder
	line bytes.Buffer
	// brief is a results file's briefs file, written and ended with it,
	// nil where their kind keeps no brief; of is a briefs file's.
	brief *part
	of    *briefOf
	// derived are the derived tables' files being made from a results
	// file's rows (Derive), rowDerived from a samples file's
	// (DeriveSamples).
	derived    []*deriving
	rowDerived []rowDeriving
}

func (d *Dataset) create(f *DatasetFile) (*part, error) {
	p := filepath.Join(d.dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return nil, err
	}
	pt := &part{file: f, tmp: tmp, out: &hashed{w: bufio.NewWriterSize(tmp, 1<<16), h: sha256.New()}}
	if f.Table == TableSamples {
		pt.pq = parquet.NewGenericWriter[Row](pt.out, fileSchema, parquet.Compression(parquetZstd), parquet.MaxRowsPerRowGroup(RowGroupRows))
	} else {
		pt.zw, _ = zstd.NewWriter(pt.out, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	}
	return pt, nil
}

// writeRow adds a sample's row.
func (p *part) writeRow(r *Row) error {
	if p.file.Rows++; p.file.Rows == 1 {
		p.file.First = r.Key
	}
	if p.rows = append(p.rows, r.Clone()); len(p.rows) == 1024 {
		return p.flush()
	}
	return nil
}

func (p *part) flush() error {
	if len(p.rows) == 0 {
		return nil
	}
	_, err := p.pq.Write(p.rows)
	p.rows = p.rows[:0]
	return err
}

// writeJSON adds a line, of key.
func (p *part) writeJSON(key string, v any) error {
	if p.file.Rows++; p.file.Rows == 1 {
		p.file.First = key
	}
	p.line.Reset()
	r, isRecord := v.(record)
	if isRecord {
		p.recordLine(r, "record")
	} else if err := json.NewEncoder(&p.line).Encode(v); err != nil {
		return err
	}
	if _, err := p.zw.Write(p.line.Bytes()); err != nil || !isRecord {
		return err
	}
	// A record that is no object keeps no brief: it is its own.
	if p.brief != nil {
		if r.brief != nil {
			r.Record = r.brief
		} else if b := p.brief.of.json(r.Record); b != nil {
			r.Record = b
		}
	}
	for _, dv := range p.derived { // of the record as a reader of its briefs has it
		dv.put(r.Record)
	}
	if p.brief == nil {
		return nil
	}
	if p.brief.file.Rows++; p.brief.file.Rows == 1 {
		p.brief.file.First = key
	}
	p.brief.line.Reset()
	p.brief.recordLine(r, "brief")
	_, err := p.brief.zw.Write(p.brief.line.Bytes())
	return err
}

// recordLine is r's line, its record under member. By hand:
// encoding/json would compact the record again, and it is compact (the
// store keeps it as json.Marshal wrote it).
func (p *part) recordLine(r record, member string) {
	k, _ := json.Marshal(r.Key)
	p.line.WriteString(`{"key":`)
	p.line.Write(k)
	p.line.WriteString(`,"started_at":"`)
	p.line.Write(r.StartedAt.UTC().AppendFormat(nil, time.RFC3339Nano))
	p.line.WriteString(`","` + member + `":`)
	p.line.Write(bytes.TrimSpace(r.Record))
	p.line.WriteString("}\n")
}

// close ends the file and gives it its name.
func (p *part) close(dir string) error {
	var err error
	if p.pq != nil {
		err = errors.Join(p.flush(), p.pq.Close())
	} else {
		err = p.zw.Close()
	}
	if err == nil {
		err = p.out.w.(*bufio.Writer).Flush()
	}
	if err == nil {
		err = p.tmp.Sync()
	}
	err = errors.Join(err, p.tmp.Close())
	if err == nil {
		err = os.Rename(p.tmp.Name(), filepath.Join(dir, filepath.FromSlash(p.file.Path)))
	}
	if err != nil {
		os.Remove(p.tmp.Name())
		return fmt.Errorf("dataset: writing %s: %w", p.file.Path, err)
	}
	p.file.Octets, p.file.SHA256 = p.out.n, hex.EncodeToString(p.out.h.Sum(nil))
	return nil
}

// abort lets a file go unwritten, and its briefs file.
func (p *part) abort() {
	p.endDerived()
	p.tmp.Close()
	os.Remove(p.tmp.Name())
	if p.brief != nil {
		p.brief.abort()
	}
}

// partitionDir is the directory a file of the table goes to.
func partitionDir(table string, kind Kind, run, vantage, day string) string {
	switch table {
	case TableSamples:
		if vantage == "" {
			vantage = NoVantage
		}
		return "run_id=" + escape(run) + "/vantage=" + escape(vantage) + "/day=" + day
	case TableRuns:
		return "_records/runs"
	case TableSampleRaw:
		return "_records/sample_raw/run_id=" + escape(run) + "/day=" + day
	}
	if kind == "" { // a table derived from the samples
		return "_records/" + table + "/run_id=" + escape(run) + "/day=" + day
	}
	return "_records/" + table + "/kind=" + escape(string(kind)) + "/run_id=" + escape(run) + "/day=" + day
}

package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A result's brief (schema 14) is its record less the members its
// analysis never reads, packed as records are, made when it is written:
// a report's first read of half a million page loads decoded 3.9 GB of
// JSON to skip four fifths of it (24 s of CPU, and 10 s of zstd, of a
// report's 82 s at ten million samples). OONI's pipeline likewise keeps
// what its analysis reads beside each measurement, made at ingest. The
// record stays the truth, and the brief is only a projection of it:
// every member it keeps is the record's, as written, so the analysis
// decodes a brief as it decodes its record. A brief is headed by the
// digest of its kind and the members it left out: where an analysis
// leaves out others (a build that reads more), the briefs made before
// do not match, and their records are read.

// briefs are the members each kind's briefs leave out, by kind.
var briefs = map[Kind]*briefOf{}

type briefOf struct {
	head []byte          // heads each brief: briefMark and the digest
	drop map[string]bool // dotted paths of the members left out
	// nested are the paths that lead to one left out ("load" for
	// "load.dns"): an object there is briefed member by member.
	nested map[string]bool
}

// briefMark heads a brief's head: no packed record starts with it.
const briefMark = 0xff

// briefHead is how many octets head a brief: the mark and 8 of the
// digest.
const briefHead = 9

// Brief declares that results of kind are written with a brief that
// leaves out the members at paths drop (dotted, "load.dns": member dns
// of the object that is member load), those its analysis never reads.
// Declared at init, with the kind; declared twice, it panics.
func Brief(kind Kind, drop ...string) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, ok := briefs[kind]; ok {
		panic("store: a brief of " + string(kind) + " declared twice")
	}
	drop = slices.Sorted(slices.Values(drop))
	b := &briefOf{drop: map[string]bool{}, nested: map[string]bool{}}
	for _, p := range drop {
		b.drop[p] = true
		for i := range len(p) {
			if p[i] == '.' {
				b.nested[p[:i]] = true
			}
		}
	}
	sum := sha256.Sum256([]byte(string(kind) + "\x00" + strings.Join(drop, "\x00")))
	b.head = append([]byte{briefMark}, sum[:briefHead-1]...)
	briefs[kind] = b
}

// briefFor is the brief of kind declared, or nil.
func briefFor(kind Kind) *briefOf {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	return briefs[kind]
}

// make is the brief of raw, as its column keeps it; nil where raw is not
// a JSON object (the record is then read whole, as before briefs).
func (b *briefOf) make(raw []byte) []byte {
	if j := b.json(raw); j != nil {
		return append(bytes.Clone(b.head), packRaw(j)...)
	}
	return nil
}

// json is the brief of raw as JSON; nil where raw is not a JSON object.
func (b *briefOf) json(raw []byte) []byte {
	if b == nil {
		return nil
	}
	var out bytes.Buffer
	// The members' values as written (escapes too), not reformatted.
	dec, enc := jsontext.NewDecoder(bytes.NewReader(raw)), jsontext.NewEncoder(&out, jsontext.PreserveRawStrings(true))
	if dec.PeekKind() != '{' || b.object(dec, enc, "") != nil {
		return nil
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil // more after the object: not a record
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// object copies the object dec is at to enc, less the members left out;
// path is where it lies ("" the record, "load." its member load).
func (b *briefOf) object(dec *jsontext.Decoder, enc *jsontext.Encoder, path string) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if err := enc.WriteToken(tok); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		// A token is the decoder's until its next read: its text kept.
		name := jsontext.String(tok.String())
		at := path + tok.String()
		switch {
		case b.drop[at]:
			err = dec.SkipValue()
		case b.nested[at] && dec.PeekKind() == '{':
			if err = enc.WriteToken(name); err == nil {
				err = b.object(dec, enc, at+".")
			}
		default:
			if err = enc.WriteToken(name); err == nil {
				var v jsontext.Value
				if v, err = dec.ReadValue(); err == nil {
					err = enc.WriteValue(v)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	if tok, err = dec.ReadToken(); err != nil {
		return err
	}
	return enc.WriteToken(tok)
}

// StoredBriefs is StoredResults for an analysis that reads only what
// the kind's briefs keep (Brief): each result's brief where it has one
// made as its kind's are now, else its record. f cannot tell them
// apart: a brief is the record less members it never reads.
func (s *Store) StoredBriefs(ctx context.Context, runs []string, kind Kind, after int64, f func(runID string, raw []byte) error) error {
	return s.storedBriefs(ctx, runs, kind, after, func(id string, z []byte, borrowed bool) error { return handRaw(id, z, borrowed, f) })
}

// StoredPacked is StoredBriefs handing each result packed, as the store
// keeps it, for f's caller to Unpack where it likes: half a million page
// loads take seconds to unpack, which the goroutines that decode them
// share where the one that reads would do it alone. f may keep z.
func (s *Store) StoredPacked(ctx context.Context, runs []string, kind Kind, after int64, f func(runID string, z []byte) error) error {
	return s.storedBriefs(ctx, runs, kind, after, func(id string, z []byte, borrowed bool) error {
		if borrowed {
			z = bytes.Clone(z)
		}
		return f(id, z)
	})
}

// storedBriefs is StoredBriefs handing f each result's column packed.
func (s *Store) storedBriefs(ctx context.Context, runs []string, kind Kind, after int64, f func(runID string, z []byte, borrowed bool) error) error {
	if len(runs) == 0 {
		return nil
	}
	col, args := `z`, []any(nil)
	if b := briefFor(kind); b != nil {
		col, args = `CASE WHEN `+s.briefHeadSQL()+` = ? THEN brief ELSE z END`, []any{b.hexHead()}
	}
	q, args := storedQuery(col, args, runs, kind, after)
	return s.eachPacked(ctx, q, args, f)
}

// briefHeadSQL is a brief's head in hex, in SQL: compared as text, as
// SQLite's reader binds no blobs.
func (s *Store) briefHeadSQL() string {
	if s.postgres {
		return fmt.Sprintf(`upper(encode(substr(brief, 1, %d), 'hex'))`, briefHead)
	}
	return fmt.Sprintf(`hex(substr(brief, 1, %d))`, briefHead)
}

// hexHead is b's head as briefHeadSQL spells it.
func (b *briefOf) hexHead() string { return fmt.Sprintf("%X", b.head) }

// unbrief is a brief's or a record's column (StoredBriefs) as packed
// record: a brief less its head.
func unbrief(z []byte) []byte {
	if len(z) >= briefHead && z[0] == briefMark {
		return z[briefHead:]
	}
	return z
}

// writeBrief is the brief a result of kind is written with, or nil.
func writeBrief(kind Kind, raw []byte) []byte { return briefFor(kind).make(raw) }

// BriefResults briefs the results of the kinds declared with briefs
// that have none, or one made by an analysis that left out other
// members (stale): results written before schema 14, or by a doxlab
// whose analysis of them skipped other members. A batch per
// transaction (rewriteBatch), read on from the last one's key, so that
// a run cut short keeps what it did; progress, if set, is told the
// results briefed so far. It returns how many it briefed. A result its
// brief cannot be made of (not a JSON object) keeps none, and is read
// whole. Briefs are not needed: a result without one is read whole, as
// before them; half a million page loads take about 100 s.
func (s *Store) BriefResults(ctx context.Context, progress func(n int)) (int, error) {
	kindsMu.Lock()
	kinds := slices.Sorted(maps.Keys(briefs))
	kindsMu.Unlock()
	n := 0
	for _, kind := range kinds {
		var after []any
		for {
			last, done, err := s.briefBatch(ctx, kind, after)
			n += done
			if err != nil {
				return n, fmt.Errorf("store: briefing the %s results: %w", kind, err)
			}
			if last == nil {
				break
			}
			after = last
			if progress != nil {
				progress(n)
			}
		}
	}
	return n, nil
}

// briefBatch briefs, in one transaction, up to packBatch results of
// kind without a current brief, after the key after (nil: from the
// first), and returns the last key it read (nil: none left) and how
// many it briefed.
func (s *Store) briefBatch(ctx context.Context, kind Kind, after []any) (last []any, n int, err error) {
	b := briefFor(kind)
	kindIs := "kind = ?"
	if !s.postgres {
		// On its rowids: through the kind's index (results_by_kind) each
		// batch read every row after its start, to sort them (quadratic:
		// 500,000 loads at 600 a second, slowing). + keeps it out.
		kindIs = "+kind = ?"
	}
	return s.rewriteBatch(ctx, "results", "run_id, kind, task_key", "z", kindIs+" AND "+s.staleBrief(), []any{kind, b.hexHead()}, "brief = ?", after,
		func(z []byte) ([]byte, error) {
			raw, err := unpackRaw(z)
			if err != nil {
				return nil, err
			}
			return b.make(raw), nil
		})
}

// staleBrief selects the results without a current brief: its
// argument is their kind's head (hexHead).
func (s *Store) staleBrief() string { return `(brief IS NULL OR ` + s.briefHeadSQL() + ` <> ?)` }

package store

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// briefKind is a kind whose briefs leave out member big and member dns
// of member load.
var briefKind = NewKind("brief-test")

func init() { Brief(briefKind, "big", "load.dns") }

// briefRecords are results of briefKind: an object briefed, one whose
// load is not an object, and a record that is no object at all.
var briefRecords = map[string]any{
	"a": map[string]any{"n": 1, "big": []int{1, 2, 3}, "load": map[string]any{"dns": "x", "keep": true, "big": 2}, "z": "<s>"},
	"b": map[string]any{"n": 2, "load": nil, "big": map[string]any{"deep": 1}},
	"c": []int{7},
}

// briefed is what an analysis reads of each of briefRecords.
var briefed = map[string]string{
	"a": `{"big":[1,2,3],"load":{"big":2,"dns":"x","keep":true},"n":1,"z":"\u003cs\u003e"}`,
	"b": `{"big":{"deep":1},"load":null,"n":2}`,
	"c": `[7]`,
}

func TestBriefs(t *testing.T) { briefed14(t, filepath.Join(t.TempDir(), "s.db")) }

func TestPostgresBriefs(t *testing.T) { briefed14(t, testutil.StartPostgres(t)) }

func briefed14(t *testing.T, dsn string) {
	ctx := context.Background()
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.BeginRun(ctx, Run{ID: "r", Kind: "t", StartedAt: time.Now()}))
	for _, k := range slices.Sorted(maps.Keys(briefRecords)) { // in the order of both engines' keys
		require.NoError(t, s.WriteResult(ctx, "r", briefKind, k, time.Now(), briefRecords[k]))
	}
	read := func(each func(context.Context, []string, Kind, int64, func(string, []byte) error) error) []string {
		var out []string
		require.NoError(t, each(ctx, []string{"r"}, briefKind, 0, func(_ string, raw []byte) error {
			out = append(out, string(raw))
			return nil
		}))
		return out
	}
	whole := []string{briefed["a"], briefed["b"], briefed["c"]}
	require.ElementsMatch(t, whole, read(s.StoredResults), "the records whole")
	want := []string{`{"load":{"big":2,"keep":true},"n":1,"z":"\u003cs\u003e"}`, `{"load":null,"n":2}`, `[7]`}
	require.ElementsMatch(t, want, read(s.StoredBriefs), "the briefs, and the record that has none")

	// A brief of members left out otherwise (another build's analysis)
	// is stale: its record is read.
	var b []byte
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT brief FROM results WHERE task_key = 'a'`).Scan(&b))
	copy(b[1:briefHead], "another")
	_, err = s.db.ExecContext(ctx, s.rebind(`UPDATE results SET brief = ? WHERE task_key = 'a'`), b)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{briefed["a"], want[1], want[2]}, read(s.StoredBriefs))

	// BriefResults briefs those without a brief or with a stale one, a
	// batch at a time; cut short, it keeps what it did.
	_, err = s.db.ExecContext(ctx, `UPDATE results SET brief = NULL WHERE task_key = 'b'`)
	require.NoError(t, err)
	defer SetPackHooks(1, nil)()
	cut, cancel := context.WithCancel(ctx)
	n, err := s.BriefResults(cut, func(int) { cancel() })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, n, "the first batch kept")
	n, err = s.BriefResults(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the rest: c is no object, and has none")
	require.ElementsMatch(t, want, read(s.StoredBriefs))
	n, err = s.BriefResults(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left")

	// store stats counts those without a current one (c: no object,
	// none can be made).
	unbriefed := func() int64 {
		st, err := s.Stats(ctx)
		require.NoError(t, err)
		for _, k := range st.Kinds {
			if k.Kind == string(briefKind) {
				return k.Unbriefed
			}
		}
		t.Fatal("no brief-test kind in the stats")
		return 0
	}
	require.Equal(t, int64(1), unbriefed())
	_, err = s.db.ExecContext(ctx, `UPDATE results SET brief = NULL WHERE task_key = 'a'`)
	require.NoError(t, err)
	require.Equal(t, int64(2), unbriefed())
	_, err = s.BriefResults(ctx, nil)
	require.NoError(t, err)

	// A store of schema 13 gets the column; its results, without briefs,
	// are read whole.
	s.Close()
	old, err := Open(ctx, dsn)
	require.NoError(t, err)
	for _, stmt := range []string{`ALTER TABLE results DROP COLUMN brief`, `UPDATE schema_version SET version = 13`} {
		_, err = old.db.ExecContext(ctx, stmt)
		require.NoError(t, err)
	}
	old.Close()
	s, err = Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	require.ElementsMatch(t, whole, read(s.StoredBriefs))
	var v int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v))
	require.Equal(t, SchemaVersion, v)
}

// FuzzBrief: no octets make a brief panic, and a brief made is the
// record less the members left out, every other member's value the
// same.
func FuzzBrief(f *testing.F) {
	for _, v := range briefRecords {
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	f.Add([]byte(`{"load":{"dns":1,"dns":2},"big":[{"big":1}],"x":"\u00e9\ud800"}`))
	f.Add([]byte(`{"a":1} {"b":2}`))
	f.Add([]byte(`{"load":{"load":{"dns":1}}}`))
	b := briefFor(briefKind)
	f.Fuzz(func(t *testing.T, raw []byte) {
		z := b.make(raw)
		if z == nil {
			return
		}
		require.Equal(t, b.head, z[:briefHead])
		got, err := unpackRaw(z[briefHead:])
		require.NoError(t, err)
		var whole, brief map[string]any
		if json.Unmarshal(raw, &whole) != nil {
			return // encoding/json is stricter than jsontext (invalid UTF-8, duplicate names)
		}
		require.NoError(t, json.Unmarshal(got, &brief), "%s", got)
		delete(whole, "big")
		if load, ok := whole["load"].(map[string]any); ok {
			delete(load, "dns")
		}
		require.Equal(t, whole, brief)
	})
}

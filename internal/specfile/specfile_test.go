package specfile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type inner struct {
	Name  string        `yaml:"name"`
	Delay time.Duration `yaml:"delay"`
}

type spec struct {
	Repeat int            `yaml:"repeat"`
	Rate   float64        `yaml:"rate"`
	On     bool           `yaml:"on"`
	Seed   uint64         `yaml:"seed"`
	List   []string       `yaml:"list"`
	Items  []inner        `yaml:"items"`
	Inner  *inner         `yaml:"inner"`
	Tags   map[string]int `yaml:"tags"`
	Inline `yaml:",inline"`
	Extra  map[string]string `yaml:"extra"`
}

type Inline struct {
	Label string `yaml:"label"`
}

func errs(t *testing.T, doc string) []string {
	t.Helper()
	var s spec
	err := Decode("f.yaml", []byte(doc), &s).Err()
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestShapeErrorsReadLikeFlagErrors(t *testing.T) {
	require.Equal(t, []string{
		`f.yaml:1: repeat: want a whole number, got "three"`,
		`f.yaml:2: rate: want a number, got "fast"`,
		`f.yaml:3: on: want true or false, got "maybe"`,
		`f.yaml:4: seed: want a whole number, 0 or more, got "-1"`,
		`f.yaml:5: list: want a list ([a, b] or one "- item" a line), got "one"`,
		`f.yaml:8: items[2].delay: want a duration with its unit, such as 500ms, 10s or 2h, got "5"`,
		`f.yaml:9: inner.nme: unknown field (did you mean name?)`,
		`f.yaml:10: tags.a: want a whole number, got "x"`,
		`f.yaml:11: lable: unknown field (did you mean label?)`,
		`f.yaml:12: repeat: given twice`,
	}, errs(t, "repeat: three\nrate: fast\non: maybe\nseed: -1\nlist: one\nitems:\n  - {name: a, delay: 1s}\n  - {name: b, delay: 5}\ninner: {nme: x}\ntags: {a: x}\nlable: y\nrepeat: 2\n"))
}

func TestGoodValuesDecode(t *testing.T) {
	var s spec
	f := Decode("f.yaml", []byte("repeat: 0x10\nrate: 2\non: true\nlist: [a, b]\ninner: {name: n, delay: 1m}\nlabel: l\nitems:\n  - {name: a}\n  - ~\n"), &s)
	require.NoError(t, f.Err())
	require.Equal(t, 16, s.Repeat)
	require.Equal(t, 2.0, s.Rate)
	require.Equal(t, time.Minute, s.Inner.Delay)
	require.Equal(t, "l", s.Label, "inline fields")
	require.Equal(t, 8, f.Line("items[1]"))
	require.Equal(t, 5, f.Line("inner.delay"))
	require.Zero(t, f.Line("seed"), "a field that is not there has no line")

	f.Bad("inner.delay", "too long")
	require.True(t, f.Failed("inner"))
	require.EqualError(t, f.Err(), "f.yaml:5: inner.delay: too long")
	require.NoError(t, Decode("f.yaml", nil, &s).Err(), "an empty file is every field's zero")
}

func TestSyntaxErrorsOnTheirLine(t *testing.T) {
	require.Equal(t, []string{"f.yaml:2: did not find expected ',' or ']' (a list opened with [ on this line is not closed)"}, errs(t, "repeat: 1\nlist: [a, b\nrate: 2\n"))
	require.Equal(t, []string{"f.yaml:2: found a tab character that violates indentation (indent with spaces)"}, errs(t, "repeat: 1\n\trate: 2\n"))
}

// A merge key (<<: *anchor) is YAML's way to share fields between list
// items: it must read as yaml.v3 decodes it (the mapping's own keys win,
// then the first merged mapping's), not as an unknown field "<<".
func TestMergeKeys(t *testing.T) {
	var s spec
	doc := "items:\n  - &first {name: a, delay: 1s}\n  - <<: *first\n    name: b\n  - {name: c, <<: *first}\n" +
		"inner:\n  <<: [*first, {name: z, delay: 9s}]\n"
	require.NoError(t, Decode("f.yaml", []byte(doc), &s).Err())
	require.Equal(t, []inner{{"a", time.Second}, {"b", time.Second}, {"c", time.Second}}, s.Items)
	require.Equal(t, &inner{"a", time.Second}, s.Inner, "the first merged mapping wins")

	// What a merged mapping brings is checked where it lands.
	require.Equal(t, []string{
		`f.yaml:2: items[1].nme: unknown field (did you mean name?)`,
		`f.yaml:2: items[1].delay: want a duration with its unit, such as 500ms, 10s or 2h, got "5"`,
		`f.yaml:2: items[2].nme: unknown field (did you mean name?)`,
		`f.yaml:2: items[2].delay: want a duration with its unit, such as 500ms, 10s or 2h, got "5"`,
		`f.yaml:4: items[3].<<: want a mapping to merge (<<: *anchor, or a list of them), got "7"`,
	}, errs(t, "items:\n  - &x {nme: a, delay: 5}\n  - <<: *x\n  - <<: 7\n"))
}

// A key given twice is an error in a map as in a struct: yaml.v3 would
// otherwise drop the whole map and say so only among the errors
// specfile replaces by its own.
func TestKeysGivenTwice(t *testing.T) {
	require.Equal(t, []string{
		"f.yaml:1: tags.a: given twice",
		"f.yaml:4: extra.k: given twice",
	}, errs(t, "tags: {a: 1, a: 2}\nextra:\n  k: v\n  k: w\n"))
	require.Equal(t, []string{`f.yaml:1: tags: want a key in text, got a list`}, errs(t, "tags: {[a, b]: 1}\n"))
}

// A key given twice is one error: the rest of its mapping is decoded
// (the first of the key with it), so that no check of it fails after.
func TestKeyGivenTwiceLosesNothingElse(t *testing.T) {
	var s spec
	f := Decode("f.yaml", []byte("repeat: 1\nrate: 2\nrepeat: 3\ninner: {name: a, name: b, delay: 1s}\n"), &s)
	require.EqualError(t, f.Err(), "f.yaml:3: repeat: given twice\nf.yaml:4: inner.name: given twice")
	require.Equal(t, 1, s.Repeat, "the first")
	require.Equal(t, 2.0, s.Rate, "the rest of the mapping")
	require.Equal(t, &inner{Name: "a", Delay: time.Second}, s.Inner)
}

// TestNegative names a struct's first number below zero by its YAML
// key; text, zero and positive numbers pass.
func TestNegative(t *testing.T) {
	require.NoError(t, Negative("x", spec{Repeat: 0, Rate: 1, List: []string{"-1"}}))
	require.EqualError(t, Negative("x", spec{Rate: -0.5}), "x.rate: -0.5 is negative")
	require.EqualError(t, Negative("", inner{Delay: -time.Second}), "delay: -1s is negative")
}

// laughs is a mapping merging ten times a mapping merging ten times ...
// (depth levels): ten to the power of depth merges, in depth+2 lines.
func laughs(depth int) string {
	var b strings.Builder
	b.WriteString("x0: &m0 {name: x, delay: 1s}\n")
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "x%d: &m%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", "))
	}
	fmt.Fprintf(&b, "inner: *m%d\n", depth)
	return b.String()
}

// TestAliasesOfAliasesEndFast: YAML's "billion laughs". Merges of merges
// ten at a time, sixteen deep, walked each time they were merged, took
// a minute at nine levels; a mapping merged again brings nothing and is
// walked once. Lists of aliases of lists, which must each be checked
// where they land, stop at maxSteps values with one error, before
// yaml.v3 walks them too.
func TestAliasesOfAliasesEndFast(t *testing.T) {
	var s spec
	f := Decode("f.yaml", []byte(laughs(16)), &s)
	require.Len(t, f.errs, 17, "the anchors' own keys are unknown fields, nothing else: %v", f.Err())
	require.Equal(t, &inner{Name: "x", Delay: time.Second}, s.Inner)

	var g struct {
		Grid [][]string `yaml:"grid"`
	}
	doc := "row: &row [" + strings.TrimSuffix(strings.Repeat("a, ", 1000), ", ") + "]\n" +
		"grid: [" + strings.TrimSuffix(strings.Repeat("*row, ", 2000), ", ") + "]\n"
	err := Decode("f.yaml", []byte(doc), &g).Err()
	require.ErrorContains(t, err, fmt.Sprintf("f.yaml:1: its aliases stand for more than %d values", maxSteps))
	require.Nil(t, g.Grid, "not decoded")
	require.Len(t, strings.Split(err.Error(), "\n"), 2, "the unknown field row, and that")
}

// TestNumbersInRange: a number must fit its field, in any base yaml.v3
// reads, and a float be finite.
func TestNumbersInRange(t *testing.T) {
	var s struct {
		Small int8    `yaml:"small"`
		Port  uint16  `yaml:"port"`
		Ratio float64 `yaml:"ratio"`
		Count int     `yaml:"count"`
	}
	f := Decode("f.yaml", []byte("small: 300\nport: 70000\nratio: .nan\ncount: 1.5\n"), &s)
	require.EqualError(t, f.Err(), strings.Join([]string{
		`f.yaml:1: small: want a whole number, got "300"`,
		`f.yaml:2: port: want a whole number, 0 or more, got "70000"`,
		`f.yaml:3: ratio: want a number, got ".nan"`,
		`f.yaml:4: count: want a whole number, got "1.5"`,
	}, "\n"))
	f = Decode("f.yaml", []byte("small: -128\nport: 0xffff\nratio: 1e-3\ncount: 1_000_000\n"), &s)
	require.NoError(t, f.Err())
	require.Equal(t, int8(-128), s.Small)
	require.Equal(t, uint16(65535), s.Port)
	require.Equal(t, 1_000_000, s.Count)
	require.ErrorContains(t, Decode("f.yaml", []byte("ratio: .inf\n"), &s).Err(), `ratio: want a number, got ".inf"`)
}

// FuzzDecode: no document makes Decode panic or hang, and every error
// it gives is one line naming the file.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{"repeat: 1\n", "items:\n  - &a {name: x}\n  - <<: *a\n", "list: [a, b\n", laughs(3), "tags: {a: 1, a: 2}\n", "? [a]\n: b\n", "\t", "inner: !!binary aGk=\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var s spec
		err := Decode("f.yaml", doc, &s).Err()
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "f.yaml") {
				t.Fatalf("an error line that names no file: %q", line)
			}
		}
	})
}

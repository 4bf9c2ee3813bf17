package specfile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/doxlab/doxlab/internal/testutil"
)

// The model tests' file: every kind of field the checker knows, nested
// in lists, a pointer and a map.
type host struct {
	Name string        `yaml:"name"`
	Port uint16        `yaml:"port"`
	Wait time.Duration `yaml:"wait"`
}

type model struct {
	Count   int            `yaml:"count"`
	Small   int8           `yaml:"small"`
	Ratio   float64        `yaml:"ratio"`
	Enabled bool           `yaml:"enabled"`
	Label   string         `yaml:"label"`
	Every   time.Duration  `yaml:"every"`
	Names   []string       `yaml:"names"`
	Hosts   []host         `yaml:"hosts"`
	Tags    map[string]int `yaml:"tags"`
	Main    *host          `yaml:"main"`
}

// writer builds a file a line at a time, noting what each bad value
// must be reported as (its field, at its line) and what each good one
// must decode to.
type writer struct {
	rng  *rand.Rand
	b    bytes.Buffer
	line int
	bad  []string       // "field@line", sorted at the end
	good map[string]any // field: value decoded
}

func (w *writer) emit(format string, a ...any) int {
	w.line++
	fmt.Fprintf(&w.b, format+"\n", a...)
	return w.line
}

// value returns a scalar of kind k as written in YAML, and the value it
// decodes to when it is good (ok), or a value the checker must refuse.
func (w *writer) value(k reflect.Type) (text string, v any, ok bool) {
	r := w.rng
	good := r.IntN(4) != 0
	if k == reflect.TypeFor[time.Duration]() {
		if good {
			d := time.Duration(r.IntN(5000)) * []time.Duration{time.Millisecond, time.Second, time.Minute}[r.IntN(3)]
			return d.String(), d, true
		}
		return []string{"5", "10 s", "soon", "[1s]", "{a: 1}", "1.5"}[r.IntN(6)], nil, false
	}
	switch k.Kind() {
	case reflect.Int:
		if good {
			n := r.IntN(1<<20) - 1<<19
			if r.IntN(4) == 0 && n >= 0 {
				return fmt.Sprintf("0x%x", n), n, true
			}
			return strconv.Itoa(n), n, true
		}
		return []string{"three", "1.5", "99999999999999999999", "true", "[1]"}[r.IntN(5)], nil, false
	case reflect.Int8:
		if good {
			n := int8(r.IntN(256) - 128)
			return strconv.Itoa(int(n)), n, true
		}
		return []string{"128", "-129", "1000", "x"}[r.IntN(4)], nil, false
	case reflect.Uint16:
		if good {
			n := uint16(r.IntN(65536))
			return strconv.Itoa(int(n)), n, true
		}
		return []string{"-1", "65536", "53.0", "dns"}[r.IntN(4)], nil, false
	case reflect.Float64:
		if good {
			if r.IntN(3) == 0 {
				n := r.IntN(1000)
				return strconv.Itoa(n), float64(n), true
			}
			x := (r.Float64() - 0.5) * 1e6
			return strconv.FormatFloat(x, 'g', -1, 64), x, true
		}
		return []string{".nan", ".inf", "fast", "{x: 1}"}[r.IntN(4)], nil, false
	case reflect.Bool:
		if good {
			b := r.IntN(2) == 0
			return strconv.FormatBool(b), b, true
		}
		return []string{"yes", "no", "on", "1", "maybe"}[r.IntN(5)], nil, false
	case reflect.String:
		if good {
			s := []string{"a", "fra-1", "10.0.0.1", "53", "true", "x y"}[r.IntN(6)]
			return s, s, true // any scalar reads as text
		}
		return []string{"[a, b]", "{a: b}"}[r.IntN(2)], nil, false
	}
	panic(k)
}

// scalar writes "key: value" at indent for a field of kind k.
func (w *writer) scalar(indent, key, field string, k reflect.Type) {
	text, v, ok := w.value(k)
	w.note(field, w.emit("%s%s: %s", indent, key, text), v, ok)
}

// note records a value written at line: what it decodes to, or that it
// must be reported there.
func (w *writer) note(field string, line int, v any, ok bool) {
	if ok {
		w.good[field] = v
	} else {
		w.bad = append(w.bad, fmt.Sprintf("%s@%d", field, line))
	}
}

// hostAt writes a host's fields at indent (the first after prefix, as a
// list item's "- "), sometimes with a misspelt key.
func (w *writer) hostAt(indent, prefix, field string) {
	keys := []string{"name", "port", "wait"}
	kinds := []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[uint16](), reflect.TypeFor[time.Duration]()}
	first := true
	for i, key := range keys {
		if w.rng.IntN(5) == 0 {
			continue
		}
		lead := indent
		if first {
			lead = prefix
			first = false
		}
		w.scalar(lead, key, join(field, key), kinds[i])
	}
	if w.rng.IntN(6) == 0 {
		lead := indent
		if first {
			lead = prefix
			first = false
		}
		w.bad = append(w.bad, fmt.Sprintf("%s@%d", join(field, "prot"), w.emit("%sprot: 53", lead)))
	}
	if first {
		w.emit("%sname: only", prefix)
		w.good[join(field, "name")] = "only"
	}
}

// file writes a random file of the model's shape: fields in a random
// order, some missing, about a quarter of the values bad, a misspelt key
// now and then.
func (w *writer) file() {
	type part func()
	parts := []part{
		func() { w.scalar("", "count", "count", reflect.TypeFor[int]()) },
		func() { w.scalar("", "small", "small", reflect.TypeFor[int8]()) },
		func() { w.scalar("", "ratio", "ratio", reflect.TypeFor[float64]()) },
		func() { w.scalar("", "enabled", "enabled", reflect.TypeFor[bool]()) },
		func() { w.scalar("", "label", "label", reflect.TypeFor[string]()) },
		func() { w.scalar("", "every", "every", reflect.TypeFor[time.Duration]()) },
		func() {
			if w.rng.IntN(5) == 0 {
				w.bad = append(w.bad, fmt.Sprintf("names@%d", w.emit("names: {a: 1}")))
				return
			}
			w.emit("names:")
			for i := range w.rng.IntN(4) {
				field := fmt.Sprintf("names[%d]", i+1)
				text, v, ok := w.value(reflect.TypeFor[string]())
				w.note(field, w.emit("  - %s", text), v, ok)
			}
		},
		func() {
			w.emit("hosts:")
			for i := range 1 + w.rng.IntN(3) {
				w.hostAt("    ", "  - ", fmt.Sprintf("hosts[%d]", i+1))
			}
		},
		func() {
			w.emit("tags:")
			for i := range 1 + w.rng.IntN(3) {
				key := fmt.Sprintf("t%d", i)
				w.scalar("  ", key, "tags."+key, reflect.TypeFor[int]())
			}
		},
		func() {
			w.emit("main:")
			w.hostAt("  ", "  ", "main")
		},
		func() {
			w.bad = append(w.bad, fmt.Sprintf("cuont@%d", w.emit("cuont: 1")))
		},
	}
	for _, i := range w.rng.Perm(len(parts)) {
		if w.rng.IntN(5) != 0 {
			parts[i]()
		}
	}
	slices.Sort(w.bad)
}

// at is the value at field (a path as errors name them) in v.
func at(v reflect.Value, field string) reflect.Value {
	for _, p := range pathParts(field) {
		for v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		switch {
		case p.index >= 0:
			if p.index >= v.Len() {
				return reflect.Value{}
			}
			v = v.Index(p.index)
		case v.Kind() == reflect.Map:
			v = v.MapIndex(reflect.ValueOf(p.key))
		default:
			for i := range v.NumField() {
				if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); name == p.key {
					v = v.Field(i)
					break
				}
			}
		}
	}
	return v
}

// TestCheckerNamesEveryBadValueAndKeepsTheRest writes random files of
// every kind of field, nested in lists, a map and a pointer, in random
// orders with values good and bad, and checks what Decode promises: each
// bad value (wrong kind, out of range, a duration without its unit, NaN,
// a list for a number, a misspelt key) reported once, on its field and
// its line, and nothing else; every good value decoded beside them. A
// file the checker passes is one yaml.v3 decodes strictly, to the same.
func TestCheckerNamesEveryBadValueAndKeepsTheRest(t *testing.T) {
	for seed := range testutil.Seeds(400) {
		w := &writer{rng: rand.New(rand.NewPCG(seed, 11)), good: map[string]any{}}
		w.file()
		text := w.b.String()

		var m model
		f := Decode("m.yaml", w.b.Bytes(), &m)
		var got []string
		var es Errors
		if errors.As(f.Err(), &es) {
			for _, e := range es {
				got = append(got, fmt.Sprintf("%s@%d", e.Field, e.Line))
			}
		}
		slices.Sort(got)
		require.Equal(t, w.bad, got, "seed %d:\n%s\n%v", seed, text, f.Err())

		for field, want := range w.good {
			v := at(reflect.ValueOf(m), field)
			require.True(t, v.IsValid(), "seed %d: %s not decoded:\n%s", seed, field, text)
			require.Equal(t, want, v.Interface(), "seed %d: %s:\n%s", seed, field, text)
		}

		if len(w.bad) == 0 {
			var strict model
			dec := yaml.NewDecoder(strings.NewReader(text))
			dec.KnownFields(true)
			if err := dec.Decode(&strict); err != nil && err.Error() != "EOF" {
				t.Fatalf("seed %d: passed by the checker, refused by yaml.v3: %v\n%s", seed, err, text)
			}
			require.Equal(t, strict, m, "seed %d", seed)
		}
	}
}

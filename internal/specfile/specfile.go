// Package specfile reads doxlab's YAML files (campaign specs, server
// configs, link profiles) so that their errors read like flag errors:
// every one of them in one pass, each on one line as
//
//	file:line: field: want a whole number, got "three"
//	file:line: repat: unknown field (did you mean repeat?)
//
// yaml.v3 alone stops at the first syntax error, names Go types
// ("cannot unmarshal !!str `three` into int", "field repat not found in
// type measure.Campaign") and lists unmarshal errors on several lines.
// Here the document is parsed once into nodes, checked against the Go
// type it decodes into, decoded, and then checked by its caller, which
// adds its own errors at the lines of their fields (File.Bad).
package specfile

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/doxlab/doxlab/internal/suggest"
)

// Error is one thing wrong with a file: at a line (0 when the field is
// missing, so has none), of a field (a dotted path: query.type,
// vantages[2].asn; "" for the document).
type Error struct {
	Path  string
	Line  int
	Field string
	Msg   string
}

func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	return b.String() + ": " + e.Msg
}

// Errors are every error of a file, in the order of their lines; as an
// error, one line each.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// File is a decoded file and what is wrong with it so far.
type File struct {
	Path  string
	root  *yaml.Node
	errs  Errors
	steps int // values checked so far (aliases counted each time)
}

// maxSteps bounds the values a file's aliases may make it check: a few
// lines of anchors that alias anchors ten at a time (merges too) stand
// for ten to the power of their depth, which neither the check nor
// yaml.v3's decoding should walk (YAML's "billion laughs").
const maxSteps = 1 << 20

// step counts a value about to be checked at n; false once the file
// has made maxSteps, when its one error says so.
func (f *File) step(n *yaml.Node) bool {
	f.steps++
	if f.steps == maxSteps+1 {
		f.add(n.Line, "", fmt.Sprintf("its aliases stand for more than %d values (anchors that alias anchors?)", maxSteps))
	}
	return f.steps <= maxSteps
}

// Decode parses b (the file at path) and decodes it into v, a pointer to
// a struct with yaml tags, checking every key and value against v's
// type. A syntax error ends it there (the document cannot be read
// further); otherwise the File holds what was wrong with its shape, and
// v every value that had the right one.
func Decode(path string, b []byte, v any) *File {
	f := &File{Path: path}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		f.errs = append(f.errs, syntaxError(path, err))
		return f
	}
	if root.Kind == 0 {
		return f // empty, or comments only: every field zero
	}
	f.root = &root
	doc := &root
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return f // empty: every field zero
		}
		doc = doc.Content[0]
	}
	f.check(doc, reflect.TypeOf(v).Elem(), "")
	if f.steps > maxSteps {
		return f // yaml.v3 would walk the aliases as far before it gave up
	}
	// A key given twice, or not text, is an error said already; yaml.v3
	// would leave its whole mapping out for the one, and every check of
	// what the mapping holds would fail after it, and panic at the other
	// in a mapping that merges: the first of each key in text is decoded.
	firstKeys(doc)
	// The values of the right shape go in; yaml.v3 decodes past its type
	// errors, which check has said better, and stops at a bad merge,
	// which check has said too.
	var te *yaml.TypeError
	if err := decode(doc, v); err != nil && !errors.As(err, &te) && len(f.errs) == 0 {
		f.add(doc.Line, "", err.Error())
	}
	return f
}

// decode is doc.Decode(v), a panic of yaml.v3's an error: a file it
// cannot read is refused, not fatal.
func decode(doc *yaml.Node, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cannot be decoded (%v)", p)
		}
	}()
	return doc.Decode(v)
}

// firstKeys leaves each mapping under n with the first of each of its
// keys in text (merge keys apart).
func firstKeys(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		seen := map[string]bool{}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if k.ShortTag() != "!!merge" {
				if seen[k.Value] {
					continue
				}
				seen[k.Value] = true
			}
			kept = append(kept, k, n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		firstKeys(c)
	}
}

// Bad adds an error of field (a dotted path), at its line.
func (f *File) Bad(field, format string, a ...any) {
	f.add(f.Line(field), field, fmt.Sprintf(format, a...))
}

// Failed says whether field, a field within it or the one it is in has
// an error already: a check of its value would only repeat it (or, in a
// list item of the wrong shape, decoded as the zero value, name what the
// file never said).
func (f *File) Failed(field string) bool {
	within := func(inner, outer string) bool {
		return inner == outer || strings.HasPrefix(inner, outer+".") || strings.HasPrefix(inner, outer+"[")
	}
	return slices.ContainsFunc(f.errs, func(e Error) bool {
		return within(e.Field, field) || (e.Field != "" && within(field, e.Field))
	})
}

// Err is every error, nil when there is none.
func (f *File) Err() error {
	if len(f.errs) == 0 {
		return nil
	}
	out := slices.Clone(f.errs)
	slices.SortStableFunc(out, func(a, b Error) int { return a.Line - b.Line })
	return out
}

// Line is the line field (a dotted path) is on, 0 when it is not in the
// file.
func (f *File) Line(field string) int {
	if f.root == nil || len(f.root.Content) == 0 {
		return 0
	}
	n := f.root.Content[0]
	line := 0
	for _, part := range pathParts(field) {
		next := (*yaml.Node)(nil)
		switch {
		case part.index >= 0 && n.Kind == yaml.SequenceNode && part.index < len(n.Content):
			next = n.Content[part.index]
			line = next.Line
		case part.index < 0 && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part.key {
					next, line = n.Content[i+1], n.Content[i].Line
				}
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

type pathPart struct {
	key   string
	index int // -1 for a key
}

var indexRE = regexp.MustCompile(`^(.*)\[(\d+)\]$`)

// pathParts splits "vantages[2].asn" into vantages, 1 (from 0), asn.
func pathParts(field string) []pathPart {
	var out []pathPart
	for _, p := range strings.Split(field, ".") {
		var idx []int
		for {
			m := indexRE.FindStringSubmatch(p)
			if m == nil {
				break
			}
			i, _ := strconv.Atoi(m[2])
			idx = append([]int{i - 1}, idx...) // paths count from 1, as people do
			p = m[1]
		}
		if p != "" {
			out = append(out, pathPart{key: p, index: -1})
		}
		for _, i := range idx {
			out = append(out, pathPart{index: max(i, 0)})
		}
	}
	return out
}

func (f *File) add(line int, field, msg string) {
	f.errs = append(f.errs, Error{Path: f.Path, Line: line, Field: field, Msg: msg})
}

var durationType = reflect.TypeFor[time.Duration]()

// check walks node n against type t, the value at field.
func (f *File) check(n *yaml.Node, t reflect.Type, field string) {
	if !f.step(n) {
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // empty: the zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			f.add(n.Line, field, "want a duration such as 500ms, 10s or 2h, got "+kindName(n))
		} else if _, err := time.ParseDuration(n.Value); err != nil || n.ShortTag() != "!!str" {
			f.add(n.Line, field, fmt.Sprintf("want a duration with its unit, such as 500ms, 10s or 2h, got %q", n.Value))
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			f.add(n.Line, field, "want a mapping of "+strings.Join(fieldNames(t), ", ")+", got "+kindName(n))
			return
		}
		fields, names := structFields(t), fieldNames(t)
		for _, e := range f.entries(n, field, 0, map[*yaml.Node]bool{}) {
			sub := join(field, e.k.Value)
			ft, ok := fields[e.k.Value]
			if !ok {
				msg := "unknown field"
				if near := suggest.Nearest(e.k.Value, names, 1, true); len(near) > 0 {
					msg += " (did you mean " + near[0] + "?)"
				} else {
					msg += " (known: " + strings.Join(names, ", ") + ")"
				}
				f.add(e.k.Line, sub, msg)
				continue
			}
			f.check(e.v, ft, sub)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			f.add(n.Line, field, "want a list ([a, b] or one \"- item\" a line), got "+kindName(n))
			return
		}
		for i, item := range n.Content {
			sub := fmt.Sprintf("%s[%d]", field, i+1)
			before := len(f.errs)
			f.check(item, t.Elem(), sub)
			// yaml.v3 leaves an item it cannot decode out of the list, and
			// the items after it would move up one: a caller's check of
			// the third item would then name the fourth's values, at the
			// third's line. The zero value takes its place.
			if slices.ContainsFunc(f.errs[before:], func(e Error) bool { return e.Field == sub }) {
				n.Content[i] = zeroNode(t.Elem(), item)
			}
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			f.add(n.Line, field, "want a mapping, got "+kindName(n))
			return
		}
		for _, e := range f.entries(n, field, 0, map[*yaml.Node]bool{}) {
			f.check(e.v, t.Elem(), join(field, e.k.Value))
		}
	default:
		f.scalar(n, t, field)
	}
}

// zeroNode is a node yaml.v3 decodes into a value of type t as its zero
// value, in place of at (a null would be left out of a list of text,
// numbers or structs, as a bad value is).
func zeroNode(t reflect.Type, at *yaml.Node) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Line: at.Line, Column: at.Column}
	switch {
	case t == durationType:
		n.Tag, n.Value = "!!str", "0s"
	case t.Kind() == reflect.Struct:
		n.Kind, n.Tag = yaml.MappingNode, "!!map"
	case t.Kind() == reflect.String:
		n.Tag = "!!str"
	case t.Kind() == reflect.Bool:
		n.Tag, n.Value = "!!bool", "false"
	case reflect.Zero(t).CanInt() || reflect.Zero(t).CanUint() || reflect.Zero(t).CanFloat():
		n.Tag, n.Value = "!!int", "0"
	default: // pointers, lists and maps take a null
		n.Tag = "!!null"
	}
	return n
}

// entry is a key of a mapping and its value.
type entry struct{ k, v *yaml.Node }

// entries are mapping n's keys and values as yaml.v3 decodes them: its
// own, each once (a key given again is an error, which yaml.v3 would
// otherwise report by leaving a map empty), then those its merge keys
// bring (<<: *anchor, or a list of anchors) that it does not give
// itself, the first merged mapping's first. A key that is not text is
// an error of its own. A mapping merged again (merged is those merged
// so far) brings nothing new and is not walked again.
func (f *File) entries(n *yaml.Node, field string, depth int, merged map[*yaml.Node]bool) []entry {
	var own, merges []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
			merges = append(merges, entry{k, v})
		case k.Kind != yaml.ScalarNode:
			f.add(k.Line, field, "want a key in text, got "+kindName(k))
		case seen[k.Value]:
			f.add(k.Line, join(field, k.Value), "given twice")
		default:
			seen[k.Value] = true
			own = append(own, entry{k, v})
		}
	}
	for _, m := range merges {
		from := []*yaml.Node{m.v}
		if m.v.Kind == yaml.SequenceNode {
			from = m.v.Content
		}
		for _, src := range from {
			if src.Kind == yaml.AliasNode && src.Alias != nil {
				src = src.Alias
			}
			if src.Kind != yaml.MappingNode || depth >= maxMergeDepth {
				f.add(m.k.Line, join(field, "<<"), "want a mapping to merge (<<: *anchor, or a list of them), got "+kindName(src))
				continue
			}
			if merged[src] || !f.step(src) {
				continue
			}
			merged[src] = true
			for _, e := range f.entries(src, field, depth+1, merged) {
				if !seen[e.k.Value] {
					seen[e.k.Value] = true
					own = append(own, e)
				}
			}
		}
	}
	return own
}

// maxMergeDepth bounds merges of merges: yaml.v3 refuses an anchor that
// contains itself, so this only keeps a deep chain of them finite.
const maxMergeDepth = 16

// scalar checks a scalar value of kind t.
func (f *File) scalar(n *yaml.Node, t reflect.Type, field string) {
	if n.Kind != yaml.ScalarNode {
		f.add(n.Line, field, "want "+want(t)+", got "+kindName(n))
		return
	}
	tag, v := n.ShortTag(), n.Value
	ok := true
	switch t.Kind() {
	case reflect.String:
		ok = true // any scalar reads as text
	case reflect.Bool:
		ok = tag == "!!bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 0, 64)
		ok = tag == "!!int" && err == nil && !reflect.Zero(t).OverflowInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(strings.ReplaceAll(v, "_", ""), 0, 64)
		ok = tag == "!!int" && err == nil && !reflect.Zero(t).OverflowUint(u)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(v, 64)
		ok = (tag == "!!int" || tag == "!!float") && err == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	if !ok {
		f.add(n.Line, field, fmt.Sprintf("want %s, got %q", want(t), v))
	}
}

// want names what a value of t is, as a user writes it.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "text"
}

// kindName says what a node is, for "got ...".
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// structFields are t's fields by YAML key, inline structs' included.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			maps.Copy(out, structFields(sf.Type))
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name) // yaml.v3's default
		}
		out[name] = sf.Type
	}
	return out
}

func fieldNames(t reflect.Type) []string {
	fs := structFields(t)
	names := make([]string, 0, len(fs))
	for k := range fs {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// contextual says whether a yaml.v3 syntax error is a parser's with a
// context (a flow list or mapping, a block mapping, a node).
func contextual(msg string) bool {
	return (strings.HasPrefix(msg, "did not find expected") && msg != "did not find expected <document start>") ||
		strings.HasPrefix(msg, "found undefined tag handle")
}

// hint says what a syntax error usually means.
func hint(msg string) string {
	switch msg {
	case "did not find expected ',' or ']'":
		return " (a list opened with [ on this line is not closed)"
	case "did not find expected ',' or '}'":
		return " (a mapping opened with { on this line is not closed)"
	case "did not find expected key":
		return " (an indentation that does not match the lines above?)"
	}
	if strings.HasPrefix(msg, "found a tab character") {
		return " (indent with spaces)"
	}
	return ""
}

var lineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError is yaml.v3's syntax error in the one format.
func syntaxError(path string, err error) Error {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		// yaml.v3 gives a parser error the line its construct began on,
		// counted from 0 (a scanner error's, from 1): the line of an
		// unclosed "[" one early.
		if contextual(m[2]) {
			line++
		}
		return Error{Path: path, Line: line, Msg: m[2] + hint(m[2])}
	}
	return Error{Path: path, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// Negative names the first field of struct v, by its YAML key after
// prefix, that holds a number below zero (durations included): where
// zero is a default or none, a negative value is a typo to refuse, not
// a setting.
func Negative(prefix string, v any) error {
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		var neg bool
		switch x := rv.Field(i); x.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			neg = x.Int() < 0
		case reflect.Float32, reflect.Float64:
			neg = x.Float() < 0
		}
		if neg {
			return fmt.Errorf("%s: %v is negative", join(prefix, name), rv.Field(i).Interface())
		}
	}
	return nil
}

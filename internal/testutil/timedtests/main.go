// Command timedtests lists the tests whose verdict depends on time, for
// scripts/hog-check.sh: every Test function that calls testutil.Scaled,
// ScaledMs or Timed, itself or through a function of its package's tests
// that does. It prints a line per package: the package and a -run
// regexp of its timed tests. With -seeded it lists the tests that call
// testutil.Seeds or Rounds too: the model tests the race lane walks one
// seed of, and the leak tests it repeats twice, which scripts/tests.sh
// runs whole in the unit lane.
//
// With -lane it prints what the timed lane runs: a first line, the -run
// (and, for every other lane, -skip) regexp of every timed test's name,
// anchored; then each package holding a test of one of those names. A
// test that shares a timed test's name in another package is skipped by
// the other lanes too, so its package is listed: every test runs once.
//
//	go run ./internal/testutil/timedtests [-seeded|-lane] [DIR]
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// markers are the testutil functions that say a test is timed.
var markers = []string{"Scaled", "ScaledMs", "Timed"}

func main() {
	args := os.Args[1:]
	lane := false
	switch {
	case len(args) > 0 && args[0] == "-seeded":
		markers, args = append(markers, "Seeds", "Rounds"), args[1:]
	case len(args) > 0 && args[0] == "-lane":
		lane, args = true, args[1:]
	}
	root := "."
	if len(args) > 0 {
		root = args[0]
	}
	byDir := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], f)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "timedtests:", err)
		os.Exit(1)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	if lane {
		printLane(dirs, byDir)
		return
	}
	for _, d := range dirs {
		if tests := timed(byDir[d]); len(tests) > 0 {
			fmt.Printf("./%s %s\n", filepath.ToSlash(d), strings.Join(tests, "|"))
		}
	}
}

// printLane prints the timed lane's regexp and its packages (see -lane).
func printLane(dirs []string, byDir map[string][]*ast.File) {
	names := map[string]bool{}
	for _, d := range dirs {
		for _, t := range timed(byDir[d]) {
			names[t] = true
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(os.Stderr, "timedtests: no timed test")
		os.Exit(1)
	}
	fmt.Printf("^(%s)$\n", strings.Join(slices.Sorted(maps.Keys(names)), "|"))
	for _, d := range dirs {
		if slices.ContainsFunc(tests(byDir[d]), func(t string) bool { return names[t] }) {
			fmt.Printf("./%s\n", filepath.ToSlash(d))
		}
	}
}

// tests are the Test functions of one directory's test files.
func tests(files []*ast.File) []string {
	var out []string
	for _, f := range files {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && isTest(fd.Name.Name) {
				out = append(out, fd.Name.Name)
			}
		}
	}
	return out
}

func isTest(name string) bool { return strings.HasPrefix(name, "Test") && name != "TestMain" }

// timed are the Test functions of one directory's test files that reach
// a marker.
func timed(files []*ast.File) []string {
	calls := map[string][]string{} // function -> the package's functions it calls
	marked := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil || fd.Recv != nil {
				continue
			}
			name := fd.Name.Name
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "testutil" && slices.Contains(markers, x.Sel.Name) {
						marked[name] = true
					}
				case *ast.Ident:
					calls[name] = append(calls[name], x.Name)
				}
				return true
			})
		}
	}
	// A function is timed when it reaches a marked one.
	for changed := true; changed; {
		changed = false
		for fn, callees := range calls {
			if marked[fn] {
				continue
			}
			for _, c := range callees {
				if marked[c] && c != fn {
					marked[fn], changed = true, true
					break
				}
			}
		}
	}
	var out []string
	for fn := range marked {
		if isTest(fn) {
			out = append(out, fn)
		}
	}
	slices.Sort(out)
	return out
}

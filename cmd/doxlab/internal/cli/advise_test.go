package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/testbed"
)

// TestAdviceIsTheCLIs: the libraries' errors name no command or flag;
// the CLI adds what to type.
func TestAdviceIsTheCLIs(t *testing.T) {
	require.Contains(t, advise(&testbed.UpError{Name: "tb", PID: 7}).Error(), "testbed tb is already up (pid 7); run 'doxlab testbed down --name tb' first")
	require.Contains(t, advise(campaign.ErrNeedPostgres).Error(), "--store postgres://")
	require.Contains(t, advise(corpus.ErrNoGraph).Error(), "doxlab load --capture")
	require.Equal(t, "other", advise(errString("other")).Error())
}

type errString string

func (e errString) Error() string { return string(e) }

// TestLibrariesNameNoFlags reads every library package's source: no
// string in an errors.New or fmt.Errorf call names a doxlab command or a
// flag. The CLI says those (advise). The experiments are the exception:
// each declares its own flags (Flags) and checks them.
func TestLibrariesNameNoFlags(t *testing.T) {
	cli := regexp.MustCompile(`'doxlab |\bdoxlab [a-z-]+ (--|[a-z])|(^|[ (])--[a-z][a-z-]+`)
	root := "../../../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "cmd", ".git", "demo-output", "scripts", "experiment":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !(sel.Sel.Name == "Errorf" || sel.Sel.Name == "New") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || (x.Name != "fmt" && x.Name != "errors") {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					if cli.MatchString(s) {
						t.Errorf("%s: an error names the CLI: %q", rel, s)
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
}

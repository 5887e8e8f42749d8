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
)

// envShape is what an environment variable name looks like.
var envShape = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)

// setNotRead are variables kiln puts into the pods it creates.
var setNotRead = map[string]bool{"KILN_AUTH_KEYS": true, "KILN_CLUSTER": true, "KILN_PROJECT_TOKEN": true}

// envReads scans kiln's non-test source (what the release binary is built
// from: not the test control plane, emulator or test hooks) for the
// environment variables it reads: the argument of os.Getenv, os.LookupEnv
// and of any call to a function value named getenv (a literal or a
// constant), and every env-shaped string literal of the packages.
func envReads(t *testing.T) map[string]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	skip := []string{"internal/testenv/testcluster", "internal/testenv/awsemu", "internal/testenv/testhooks", "hack", "bench", ".cache", "docs"}
	fset := token.NewFileSet()
	var files []*ast.File
	var names []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files = append(files, f)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, _ := strconv.Unquote(lit.Value)
							consts[id.Name] = v
						}
					}
				}
			}
			return true
		})
	}
	reads := map[string]string{}
	for i, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				reader := false
				switch fn := x.Fun.(type) {
				case *ast.SelectorExpr:
					if id, ok := fn.X.(*ast.Ident); ok && id.Name == "os" && (fn.Sel.Name == "Getenv" || fn.Sel.Name == "LookupEnv") {
						reader = true
					}
				case *ast.Ident:
					reader = strings.EqualFold(fn.Name, "getenv")
				}
				if reader && len(x.Args) == 1 {
					switch a := x.Args[0].(type) {
					case *ast.BasicLit:
						v, _ := strconv.Unquote(a.Value)
						reads[v] = names[i]
					case *ast.Ident:
						if v, ok := consts[a.Name]; ok {
							reads[v] = names[i]
						}
					case *ast.SelectorExpr:
						if v, ok := consts[a.Sel.Name]; ok {
							reads[v] = names[i]
						}
					}
				}
			case *ast.BasicLit:
				if x.Kind == token.STRING {
					v, _ := strconv.Unquote(x.Value)
					if envShape.MatchString(v) && !setNotRead[v] {
						reads[v] = names[i]
					}
				}
			}
			return true
		})
	}
	return reads
}

func TestEnvironmentPageListsEveryVariable(t *testing.T) {
	reads := envReads(t)
	for _, want := range []string{"KILN_CONTEXTS", "KILN_KEYRING_PASSPHRASE", "XDG_STATE_HOME", "DBUS_SESSION_BUS_ADDRESS", "NO_COLOR", "AWS_PROFILE"} {
		if _, ok := reads[want]; !ok {
			t.Errorf("the source scan misses %s: it would not notice a new variable either", want)
		}
	}
	listed := map[string]bool{}
	for _, v := range environmentVars {
		listed[v.name] = true
	}
	page := environmentPage()
	for name, file := range reads {
		if !listed[name] || !strings.Contains(page, name) {
			t.Errorf("%s reads %s, which `kiln help environment` does not list (add it to environmentVars)", file, name)
		}
	}
}

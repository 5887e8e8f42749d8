package input

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// flagWord is a flag as a command line spells it (--token-dir), or the
// start of one a format or a concatenation completes ("--%s", "--" + x).
var flagWord = regexp.MustCompile(`(^|[^-\w])(--(?:[a-z][a-z0-9-]*|%[a-z]|$))`)

// kilnCommand is a kiln command line written out (reported as "kiln VERB"):
// a literal that starts with one ("kiln upgrade PROVIDER NAME -c FILE") or
// one in backquotes ("run `kiln tokens forget kube dev1`"). A hint gives a
// command through engine.Command and the frontend's Actions instead, so
// that the wizard words it as its own key.
var kilnCommand = regexp.MustCompile("(^|`)(kiln (?:" + strings.Join(kilnVerbs, "|") + `))\b`)

// kilnVerbs are kiln's commands (internal/cli; docs/reference).
var kilnVerbs = []string{"aws", "completion", "create", "destroy", "gateway", "inspect", "list", "project", "rotate-key", "status", "support", "tokens", "upgrade", "version", "wait"}

// notWords are the string literals of engine and creds that name a flag
// without being words to a user of kiln, by file (slash-separated, from
// the repository root) and flag. Everything else names an input through
// this package (an {input} mark, FlagName, a Namer), so that the wizard
// never shows a CLI flag.
var notWords = map[string][]string{
	// FlagName itself: "--" + the input, and the config file's flag.
	"engine/input/input.go": {"--", "--config"},
	// Arguments kiln passes to the gateway's container.
	"engine/platform/platform.go": {"--listen", "--metrics-listen", "--auth-dir", "--cluster", "--domain", "--tls-cert", "--tls-key"},
	// The gateway's argument the probe detects (TLS on its port).
	"engine/probe.go": {"--tls-cert"},
	// Arguments of the kubeconfig's exec entry (aws eks get-token's
	// stand-in: `aws token --cluster`), and their detection.
	"engine/provider/aws/kubeconfig.go": {"--cluster", "--region", "--profile"},
	// Flags kiln detects in the CNI's containers' arguments.
	"engine/isolation.go": {"--enable-network-policy", "--network-policy"},
	// kubectl's flags, in the kubectl commands kiln shows (its own
	// program, the same in every frontend).
	"engine/frontdoor.go": {"--context", "--cert", "--key"},
	// gnome-keyring-daemon's flag.
	"creds/secretservice_linux.go": {"--unlock"},
	// kiln commands written out where they are not a hint to type: the
	// support bundle's index title, and what the kubeconfig's exec entry
	// runs (`kiln aws token`).
	"engine/bundle/bundle.go":      {"kiln support"},
	"engine/provider/aws/infra.go": {"kiln aws"},
	// The CLI's words for a hint when the frontend has no Actions (the
	// wizard's are its keys): a project command, the commands that remove
	// an old key.
	"engine/project/project.go": {"kiln project"},
	"engine/rotate.go":          {"kiln upgrade"},
}

// flagLiteral is a string literal naming a flag.
type flagLiteral struct {
	pos  token.Position
	flag string
}

// flagLiterals lists the string literals of the parsed file f that name a
// flag not allowed for file (a key of notWords).
func flagLiterals(fset *token.FileSet, f *ast.File, file string) []flagLiteral {
	var out []flagLiteral
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			s = lit.Value
		}
		for _, re := range []*regexp.Regexp{flagWord, kilnCommand} {
			for _, m := range re.FindAllStringSubmatch(s, -1) {
				if !allowed(file, m[2]) {
					out = append(out, flagLiteral{fset.Position(lit.Pos()), m[2]})
				}
			}
		}
		return true
	})
	return out
}

func allowed(file, flag string) bool {
	for _, f := range notWords[file] {
		if f == flag {
			return true
		}
	}
	return false
}

// TestNoFlagWordsInEngineOrCreds keeps CLI flag text out of the messages
// of engine and creds (issue #29 item 2): a message names what the user
// gives through this package, and each frontend words it (the CLI as a
// flag, the wizard as its field or key). It parses every non-test Go file
// under engine/ and creds/ and fails naming FILE:LINE for each string
// literal that spells a --flag or a kiln command line (kilnCommand),
// except the few in notWords that are not words to a user (arguments kiln
// passes to processes, flags it detects in other programs' arguments) or
// are the CLI's words where a frontend has no Actions.
func TestNoFlagWordsInEngineOrCreds(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var found []string
	files := 0
	for _, dir := range []string{"engine", "creds"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			for _, l := range flagLiterals(fset, f, filepath.ToSlash(rel)) {
				found = append(found, l.pos.String()+": "+l.flag)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("parsed %d files under engine/ and creds/: not the tree this test guards", files)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: a CLI flag or command as literal text; name the input through engine/input ({input} in input.New, FlagName, the frontend's Namer) and a command through engine.Command or the frontend's Actions, so that the wizard words it its own way", f)
	}
}

// TestFlagLiteralsCatchesAPlantedFlag is the control: a planted message
// naming a flag is found, with its line; the same flag is let through
// only in a file allowed to pass it, and comments and {input} marks are
// not flags.
func TestFlagLiteralsCatchesAPlantedFlag(t *testing.T) {
	src := `package p

// run it with --token-dir (a comment: not a message)
var a = "{input} %s: no such dir"
var b = fmt.Sprintf("%s: run create with --token-dir %s", x, y)
var c = ` + "`kiln upgrade aws dev1 --yes`" + `
var d = "--cluster=" + name
var e = "a-b--c and x--y are not flags; - - neither"
var f = "--" + kind
var g = fmt.Sprintf("--%s %s: refused", kind, arn)
var h = "kiln upgrade PROVIDER NAME -c FILE"
var i = fmt.Sprintf("move it aside or run ` + "`kiln tokens forget %s %s`" + `", p, n)
var j = "kiln takes the lease over; kiln-system, kiln platform and kiln's status are not commands"
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "engine/planted.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range flagLiterals(fset, f, "engine/planted.go") {
		got = append(got, l.pos.String()+" "+l.flag)
	}
	want := []string{"engine/planted.go:5:21 --token-dir", "engine/planted.go:6:9 --yes", "engine/planted.go:6:9 kiln upgrade", "engine/planted.go:7:9 --cluster",
		"engine/planted.go:9:9 --", "engine/planted.go:10:21 --%s", "engine/planted.go:11:9 kiln upgrade", "engine/planted.go:12:21 kiln tokens"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("found %q, want %q", got, want)
	}
	// The gateway's container args are allowed in its own file only.
	var inPlatform []string
	for _, l := range flagLiterals(fset, f, "engine/platform/platform.go") {
		inPlatform = append(inPlatform, l.flag)
	}
	if strings.Join(inPlatform, "|") != "--token-dir|--yes|kiln upgrade|--|--%s|kiln upgrade|kiln tokens" {
		t.Errorf("in engine/platform/platform.go found %q, want the message flags and commands only", inPlatform)
	}
}

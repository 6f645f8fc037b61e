package boundaries

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// shellish matches text that reads as shell: its keywords at a line's start or after a ';', a
// command substitution, a test bracket.
var shellish = regexp.MustCompile(`(?m)(^|;)\s*(if|then|fi|for|while|do|done|esac)\b|\bcase \S+ in\b|\$\(|\[ -[a-z] `)

// multiLineShell lists the string literals of the Go files under dir (tests aside) that hold
// two or more lines of shell.
func multiLineShell(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil || strings.Count(strings.TrimSpace(v), "\n") == 0 || !shellish.MatchString(v) {
				return true
			}
			found = append(found, fset.Position(lit.Pos()).String())
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// No multi-line shell in Go string literals outside the layer and bundle builders: the shell
// the plugin runs lives in .sh files that shellcheck reads (LINT_SHELL, TestScriptsParse).
func TestNoMultiLineShellInGo(t *testing.T) {
	builders := map[string]bool{"layer": true, "bundle": true}
	entries, err := filepath.Glob("../*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range entries {
		if builders[filepath.Base(dir)] {
			continue
		}
		for _, at := range multiLineShell(t, dir) {
			t.Errorf("%s: multi-line shell in a Go string: move it to an embedded .sh file", at)
		}
	}
}

// TestTheScanSeesShell: the scan finds multi-line shell where there is some, and passes Go
// that generates Go, Markdown and messages.
func TestTheScanSeesShell(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nconst a = `mkdir -p \"$1\" || exit 1\nd=$(mktemp -d)`\n" +
		"const b = \"for f in *; do\\n  echo $f\\ndone\"\n" +
		"const c = \"\\tcase %d:\\n\\t\\treturn x\"\n" +
		"const d = \"| check | status |\\n|---|---|\\n\"\n" +
		"const e = `echo one`\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := multiLineShell(t, dir)
	if len(got) != 2 || !strings.Contains(got[0], "x.go:3:") || !strings.Contains(got[1], "x.go:5:") {
		t.Errorf("found %v, want the literals on lines 3 and 5", got)
	}
}

package boundaries

import (
	"go/build"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/dlami-bake/packer-plugin-dlami/"

// forbidden are the import edges that must stay gone, direct or through other packages (as
// `go list -deps` sees them; tests' own imports do not count). Transports (probe, remote,
// localhost, host) move bytes and run commands; they import no judge (checks, guard), no record
// format (report) and no builder or settings of the bake (layer, settings).
var forbidden = []struct {
	from, to, why string
}{
	{"internal/probe", "internal/report", "the probe carries the node check's output; the engine reads its report"},
	{"internal/probe", "internal/guard", "the snapshot record lives in internal/facts"},
	{"internal/probe", "internal/checks", "running commands is separate from judging"},
	{"internal/remote", "internal/layer", "the apt lock wait lives in internal/hosttools"},
	{"internal/remote", "internal/settings", "the staging folder comes resolved from the caller"},
	{"internal/remote", "internal/probe", "a transport runs what it is given"},
	{"internal/localhost", "internal/settings", "a transport runs what it is given"},
	{"internal/localhost", "internal/probe", "a transport runs what it is given"},
	{"internal/host", "internal/settings", "the host API names no settings"},
	{"internal/bom", "internal/checks", "the bill of materials is a record; settings.Checks carries the checks' settings"},
	{"internal/bom", "internal/guard", "the drift record is result.Drift"},
	{"internal/report", "internal/guard", "a report renders result.Drift, it judges nothing"},
}

// deps returns the module's packages pkg imports, directly or not, from their non-test files.
func deps(t *testing.T, root, pkg string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		bp, err := build.Default.ImportDir(filepath.Join(root, p), 0)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		for _, imp := range bp.Imports {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok || seen[rel] {
				continue
			}
			seen[rel] = true
			queue = append(queue, rel)
		}
	}
	return seen
}

func TestForbiddenImports(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range forbidden {
		t.Run(e.from+" -> "+e.to, func(t *testing.T) {
			d := deps(t, root, e.from)
			if len(d) == 0 {
				t.Fatalf("%s imports none of the module's packages: the walk read nothing", e.from)
			}
			if d[e.to] {
				t.Errorf("%s imports %s (directly or through %v): %s", e.from, e.to, slices.Sorted(maps.Keys(d)), e.why)
			}
		})
	}
}

// TestTheWalkSeesEdges: the walk finds edges that exist, so a clean answer above means something.
func TestTheWalkSeesEdges(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ from, to string }{
		{"internal/remote", "internal/host"},
		{"internal/probe", "internal/facts"},
		{"internal/probe", "internal/parse/dkms"}, // through facts or directly
		{"internal/engine", "internal/checks"},
	} {
		if !deps(t, root, e.from)[e.to] {
			t.Errorf("the walk does not see %s -> %s", e.from, e.to)
		}
	}
}

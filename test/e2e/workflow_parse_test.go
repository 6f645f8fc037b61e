package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseYAML(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		path    []string
		want    string
		wantErr string
	}{
		{name: "plain", text: "a:\n  b: c # note\n", path: []string{"a", "b"}, want: "c"},
		{name: "double quoted", text: "a: \"x: \\\"y\\\" # not a comment\"\n", path: []string{"a"}, want: `x: "y" # not a comment`},
		{name: "single quoted", text: "a: 'it''s'\n", path: []string{"a"}, want: "it's"},
		{name: "literal clip", text: "run: |\n  one\n    two\n\n  # kept\nnext: x\n", path: []string{"run"}, want: "one\n  two\n\n# kept\n"},
		{name: "literal strip", text: "run: |-\n  one\n\n", path: []string{"run"}, want: "one"},
		{name: "expression", text: "name: ${{ matrix.region }} / ${{ matrix.t }}\n", path: []string{"name"}, want: "${{ matrix.region }} / ${{ matrix.t }}"},
		{name: "flow stays raw", text: "region: [us-east-1, us-west-2]\n", path: []string{"region"}, want: "[us-east-1, us-west-2]"},
		{name: "empty value", text: "workflow_dispatch:\nnext: 1\n", path: []string{"workflow_dispatch"}, want: ""},
		{name: "document start", text: "---\n# c\na: 1\n", path: []string{"a"}, want: "1"},
		{name: "tab", text: "a:\n\tb: c\n", wantErr: "tab"},
		{name: "folded", text: "a: >\n  x\n", wantErr: "not supported"},
		{name: "anchor", text: "a: &x 1\n", wantErr: "not supported"},
		{name: "duplicate", text: "a: 1\na: 2\n", wantErr: "duplicate key"},
		{name: "bad indentation", text: "a: 1\n   b: 2\n", wantErr: "unexpected indentation"},
		{name: "not a pair", text: "just text\n", wantErr: "key: value"},
		{name: "unterminated", text: "a: \"x\n", wantErr: "unterminated"},
		{name: "empty", text: "# only\n\n", wantErr: "empty document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := parseYAML(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := n.get(tt.path...)
			if got == nil || got.Kind != yamlScalar || got.Value != tt.want {
				t.Fatalf("%v = %+v, want scalar %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestParseYAMLSequences(t *testing.T) {
	text := `steps:
- uses: a@v1
  with:
    k: v
-   name: two
    run: |
      echo 2
- plain
  # comment between items
- - nested
`
	n, err := parseYAML(text)
	if err != nil {
		t.Fatal(err)
	}
	steps := n.get("steps")
	if steps == nil || steps.Kind != yamlSequence || len(steps.Items) != 4 {
		t.Fatalf("steps = %+v, want a 4-item sequence", steps)
	}
	if got := steps.Items[0].get("with", "k").str(); got != "v" {
		t.Errorf("steps[0].with.k = %q", got)
	}
	if got := steps.Items[1].get("run").str(); got != "echo 2\n" {
		t.Errorf("steps[1].run = %q", got)
	}
	if got := steps.Items[2].str(); got != "plain" {
		t.Errorf("steps[2] = %q", got)
	}
	if inner := steps.Items[3]; inner.Kind != yamlSequence || len(inner.Items) != 1 || inner.Items[0].str() != "nested" {
		t.Errorf("steps[3] = %+v, want [nested]", inner)
	}
}

func TestParseWorkflowRebake(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "rebake", "rebake.yml"))
	if err != nil {
		t.Fatal(err)
	}
	env, jobs, err := parseWorkflow(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if env["TEMPLATE_DIR"] != "examples/rebake" {
		t.Errorf("env.TEMPLATE_DIR = %q", env["TEMPLATE_DIR"])
	}
	job, ok := jobs["rebake"]
	if !ok {
		t.Fatalf("no job rebake in %v", jobs)
	}
	var labels []string
	for _, s := range job.Steps {
		labels = append(labels, s.label())
	}
	if len(labels) < 5 || !strings.Contains(strings.Join(labels, "\n"), "Is a rebake due?") {
		t.Fatalf("steps = %q", labels)
	}
	if job.Env["PKR_VAR_region"] != "${{ matrix.region }}" {
		t.Errorf("jobs.rebake.env.PKR_VAR_region = %q", job.Env["PKR_VAR_region"])
	}
}

func TestParseWorkflowRefusesMalformedSteps(t *testing.T) {
	tests := map[string]string{
		"run and uses": "jobs:\n  j:\n    steps:\n      - run: x\n        uses: y\n",
		"neither":      "jobs:\n  j:\n    steps:\n      - name: x\n",
		"no steps":     "jobs:\n  j:\n    runs-on: x\n",
		"env not flat": "env:\n  A:\n    B: c\njobs:\n  j:\n    steps:\n      - run: x\n",
	}
	for name, text := range tests {
		if _, _, err := parseWorkflow(text); err == nil {
			t.Errorf("%s: accepted %q", name, text)
		}
	}
	want := workflowStep{Name: "", Uses: "", Run: "x\n", Env: map[string]string{"A": "1"}, With: map[string]string{}}
	_, jobs, err := parseWorkflow("jobs:\n  j:\n    steps:\n      - run: |\n          x\n        env:\n          A: \"1\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := jobs["j"].Steps[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("step = %+v, want %+v", got, want)
	}
}

func FuzzParseYAML(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "examples", "rebake", "rebake.yml")); err == nil {
		f.Add(string(b))
	}
	f.Add("a:\n- b: |\n    x\n  c: 'd'\n")
	f.Add("- - - x\n")
	f.Fuzz(func(t *testing.T, text string) {
		n, err := parseYAML(text)
		if err != nil {
			return
		}
		var walk func(*yamlNode)
		walk = func(n *yamlNode) {
			if n == nil {
				t.Fatal("nil node in a parsed document")
			}
			switch n.Kind {
			case yamlMapping:
				if len(n.Keys) != len(n.Map) {
					t.Fatalf("mapping keys %q vs %d values", n.Keys, len(n.Map))
				}
				for _, k := range n.Keys {
					walk(n.Map[k])
				}
			case yamlSequence:
				for _, it := range n.Items {
					walk(it)
				}
			case yamlScalar:
			default:
				t.Fatalf("node of kind %d", n.Kind)
			}
		}
		walk(n)
		_, _, _ = parseWorkflow(text)
	})
}

package examples

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	datasource "github.com/dlami-bake/packer-plugin-dlami/datasource/dlami"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	postprocessor "github.com/dlami-bake/packer-plugin-dlami/postprocessor/dlami"
	provisioner "github.com/dlami-bake/packer-plugin-dlami/provisioner/dlami"
)

// The three components, as their blocks are typed in a template.
const (
	compProvisioner   = "provisioner"
	compPostProcessor = "post-processor"
	compData          = "data"
)

// partialContexts says where the settings of each generated docs partial are written in a
// template: the component block and the nested block path inside it. A partial shared by two
// components (the AWS access settings, the expect block) has a context for each; an example in
// either counts. A partial with settings that is missing here fails TestDocumentedSettingsHaveExamples.
var partialContexts = map[string][]string{
	"provisioner/dlami/Config-not-required.mdx":               {"provisioner:"},
	"provisioner/dlami/Layer-required.mdx":                    {"provisioner:layer"},
	"provisioner/dlami/Layer-not-required.mdx":                {"provisioner:layer"},
	"provisioner/dlami/LayerFile-required.mdx":                {"provisioner:layer.file"},
	"provisioner/dlami/LayerFile-not-required.mdx":            {"provisioner:layer.file"},
	"provisioner/dlami/GuardConfig-not-required.mdx":          {"provisioner:guard"},
	"provisioner/dlami/NCCLConfig-not-required.mdx":           {"provisioner:nccl"},
	"provisioner/dlami/EFATrafficConfig-not-required.mdx":     {"provisioner:efa_traffic"},
	"provisioner/dlami/GPUDirectRDMAConfig-not-required.mdx":  {"provisioner:gpudirect_rdma"},
	"provisioner/dlami/ContainerCheckConfig-not-required.mdx": {"provisioner:container_check"},
	"provisioner/dlami/EC2Config-not-required.mdx":            {"provisioner:ec2"},
	"internal/nodeconf/Config-not-required.mdx":               {"provisioner:node_check"},
	"internal/nodeconf/Evidence-not-required.mdx":             {"provisioner:node_check.evidence"},
	"internal/settings/Expectations-not-required.mdx":         {"provisioner:expect", "post-processor:expect"},
	"postprocessor/dlami/Config-not-required.mdx":             {"post-processor:"},
	"postprocessor/dlami/MetadataOptions-not-required.mdx":    {"post-processor:metadata_options"},
	"postprocessor/dlami/MultiNodeConfig-not-required.mdx":    {"post-processor:multi_node"},
	"datasource/dlami/Config-not-required.mdx":                {"data:"},
	"datasource/dlami/GoldenConfig-not-required.mdx":          {"data:golden"},
	"internal/awsaccess/AccessConfig-not-required.mdx":        {"data:", "post-processor:"},
	"internal/awsaccess/AssumeRoleConfig-not-required.mdx":    {"data:assume_role", "post-processor:assume_role"},
	// Outputs, not settings.
	"datasource/dlami/DatasourceOutput.mdx": nil,
}

// docSetting is one setting a generated docs partial documents.
type docSetting struct {
	partial, name string
	deprecated    bool
}

var partialEntry = regexp.MustCompile("^- `([a-z0-9_]+)` \\(([^)]*)\\) - (.*)$")

// documentedSettings reads every setting of every generated docs partial.
func documentedSettings(t *testing.T) []docSetting {
	t.Helper()
	root := filepath.Join("..", "docs-partials")
	var out []docSetting
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".mdx") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			m := partialEntry.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			out = append(out, docSetting{partial: rel, name: m[1], deprecated: strings.HasPrefix(m[3], "Deprecated")})
		}
		if _, ok := partialContexts[rel]; n > 0 && !ok {
			t.Errorf("docs-partials/%s documents %d settings but partialContexts does not say where they are written", rel, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no documented settings found in docs-partials: run `make generate`")
	}
	return out
}

// hclSnippet is one ```hcl code block of a docs page, or a whole example template.
type hclSnippet struct {
	where string
	src   []byte
	// page is the component the docs page documents ("" for an example template): a snippet
	// without a dlami block of its own (a `layer { }` fragment) is read as that block's body.
	page string
}

// docPages maps each docs page to the component it documents.
var docPages = map[string]string{
	"README.md":                 "",
	"provisioners/dlami.mdx":    compProvisioner,
	"post-processors/dlami.mdx": compPostProcessor,
	"datasources/dlami.mdx":     compData,
}

// docSnippets returns every ```hcl block of the docs pages.
func docSnippets(t *testing.T) []hclSnippet {
	t.Helper()
	var out []hclSnippet
	for page, comp := range docPages {
		path := filepath.Join("..", "docs", filepath.FromSlash(page))
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var cur []string
		in, start, line := false, 0, 0
		for sc.Scan() {
			line++
			text := sc.Text()
			trimmed := strings.TrimSpace(text)
			switch {
			case !in && trimmed == "```hcl":
				in, start, cur = true, line+1, nil
			case in && trimmed == "```":
				in = false
				out = append(out, hclSnippet{where: fmt.Sprintf("docs/%s:%d", page, start), src: []byte(strings.Join(cur, "\n") + "\n"), page: comp})
			case in:
				cur = append(cur, text)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if in {
			t.Errorf("docs/%s:%d: ```hcl block never closed", page, start)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

// exampleSnippets returns every example template.
func exampleSnippets(t *testing.T) []hclSnippet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("*", "*.pkr.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []hclSnippet
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, hclSnippet{where: "examples/" + filepath.ToSlash(f), src: b})
	}
	return out
}

// packerTopLevel are the block types of a whole template: a snippet with one of them is a
// template (or a build), not a fragment of a dlami block.
var packerTopLevel = []string{"packer", "build", "source", "data", "variable", "locals", "provisioner", "post-processor", "post-processors", "hcp_packer_registry"}

func componentOf(b *hclsyntax.Block) string {
	if len(b.Labels) == 0 || b.Labels[0] != "dlami" {
		return ""
	}
	switch b.Type {
	case "provisioner":
		return compProvisioner
	case "post-processor":
		return compPostProcessor
	case "data":
		return compData
	}
	return ""
}

// dlamiBodies returns the body of every dlami block of a snippet with its component, and a
// fragment (a snippet with no template-level block) as the body of its page's component.
func dlamiBodies(body *hclsyntax.Body, page string) map[*hclsyntax.Body]string {
	out := map[*hclsyntax.Body]string{}
	fragment := page != ""
	for _, b := range body.Blocks {
		if slices.Contains(packerTopLevel, b.Type) {
			fragment = false
		}
	}
	if fragment {
		out[body] = page
		return out
	}
	var walk func(*hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, blk := range b.Blocks {
			if c := componentOf(blk); c != "" {
				out[blk.Body] = c
				continue
			}
			walk(blk.Body)
		}
	}
	walk(body)
	return out
}

// exemplified adds "component:path.name" for every argument and block written inside body.
func exemplified(set map[string]bool, comp, path string, body *hclsyntax.Body) {
	for name := range body.Attributes {
		set[comp+":"+path+name] = true
	}
	for _, b := range body.Blocks {
		set[comp+":"+path+b.Type] = true
		exemplified(set, comp, path+b.Type+".", b.Body)
	}
}

func parseSnippet(s hclSnippet) (*hclsyntax.Body, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(s.src, s.where, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, diags
	}
	return f.Body.(*hclsyntax.Body), nil
}

// componentSpecs are the plugin's generated HCL2 specs of the three blocks.
func componentSpecs() map[string]hcldec.ObjectSpec {
	return map[string]hcldec.ObjectSpec{
		compProvisioner:   hcldec.ObjectSpec((&provisioner.FlatConfig{}).HCL2Spec()),
		compPostProcessor: hcldec.ObjectSpec((&postprocessor.FlatConfig{}).HCL2Spec()),
		compData:          hcldec.ObjectSpec((&datasource.FlatConfig{}).HCL2Spec()),
	}
}

// TestDocsHCLExamplesDecode parses every ```hcl block of docs/ and decodes each dlami block in
// it (or the fragment, as the body of the page's block) with the plugin's generated HCL2 spec,
// so an example in the docs with a misspelt or renamed setting fails here.
func TestDocsHCLExamplesDecode(t *testing.T) {
	specs := componentSpecs()
	decoded, prepared := 0, 0
	for _, s := range docSnippets(t) {
		body, diags := parseSnippet(s)
		if diags.HasErrors() {
			t.Errorf("%s: the HCL example does not parse: %s", s.where, diags.Error())
			continue
		}
		if src := dedent(string(s.src)); string(hclwrite.Format([]byte(src))) != src {
			t.Errorf("%s: the HCL example is not formatted as `packer fmt` writes it; formatted:\n%s", s.where, hclwrite.Format([]byte(src)))
		}
		for b, comp := range dlamiBodies(body, s.page) {
			decoded++
			spec := hcldec.ObjectSpec{}
			for k, v := range specs[comp] {
				spec[k] = v
			}
			if _, diags := hcldec.Decode(b, withPackerArgs(spec), evalContextFor(b)); diags.HasErrors() {
				t.Errorf("%s: the %s \"dlami\" example does not decode with the plugin's HCL2 spec: %s", s.where, comp, diags.Error())
				continue
			}
			val, diags := hcldec.Decode(b, specs[comp], evalContextFor(b))
			if diags.HasErrors() || !val.IsWhollyKnown() {
				continue // it uses var.*, data.* or a function: `packer validate` of the examples covers those
			}
			prepared++
			if err := prepareExample(t, comp, val); err != nil {
				t.Errorf("%s: the %s \"dlami\" example is refused by the plugin (Prepare/Configure, as `packer validate` runs it):\n%v", s.where, comp, err)
			}
		}
	}
	if prepared == 0 {
		t.Error("no docs example had only literal values: nothing was run through Prepare")
	}
	t.Logf("%d docs examples decoded; %d of them, with only literal values, passed Prepare/Configure", decoded, prepared)
}

// prepareExample runs the component's own Prepare (provisioner) or Configure (post-processor,
// data source) on a decoded example, in a scratch directory that holds an empty stand-in for
// every local file the example names (scripts, apt keys, layer files, user data): the
// examples' paths are illustrations, their settings are what is checked.
func prepareExample(t *testing.T, comp string, val cty.Value) error {
	t.Helper()
	dir := t.TempDir()
	for _, p := range localFiles(comp, val) {
		if filepath.IsAbs(p) {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("#cloud-config\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	var err error
	switch comp {
	case compProvisioner:
		err = (&provisioner.Provisioner{}).Prepare(val)
	case compPostProcessor:
		err = (&postprocessor.PostProcessor{}).Configure(val)
	case compData:
		err = (&datasource.Datasource{}).Configure(val)
	}
	if err == nil {
		return nil
	}
	// A plugin test binary built without `make node-check` embeds no node check, and Prepare
	// refuses node_check for that alone; every other error still counts.
	if nb := nodecheckbin.Available(); nb != nil {
		var rest []string
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(line, nb.Error()) {
				rest = append(rest, line)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return errors.New(strings.Join(rest, "\n"))
	}
	return err
}

// localFiles are the local paths a decoded dlami block names: its layers' scripts, apt keys
// and file sources, and a post-processor's user_data_file.
func localFiles(comp string, val cty.Value) []string {
	str := func(v cty.Value) []string {
		if v.IsNull() || !v.Type().Equals(cty.String) {
			return nil
		}
		return []string{v.AsString()}
	}
	list := func(v cty.Value) []string {
		var out []string
		if v.IsNull() || !v.CanIterateElements() {
			return nil
		}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, str(e)...)
		}
		return out
	}
	var out []string
	switch comp {
	case compPostProcessor:
		out = append(out, str(val.GetAttr("user_data_file"))...)
	case compProvisioner:
		layers := val.GetAttr("layer")
		if layers.IsNull() {
			return nil
		}
		for it := layers.ElementIterator(); it.Next(); {
			_, l := it.Element()
			out = append(out, list(l.GetAttr("scripts"))...)
			out = append(out, list(l.GetAttr("apt_keys"))...)
			if files := l.GetAttr("file"); !files.IsNull() {
				for fi := files.ElementIterator(); fi.Next(); {
					_, f := fi.Element()
					out = append(out, str(f.GetAttr("source"))...)
				}
			}
		}
	}
	return out
}

// pendingExamples are settings that have no HCL example yet, by name: the only ones the test
// excuses. They came with the check catalog (skip_checks, warn_checks, site_checks_dir and the
// node check's function tests) while their docs were still being written; each is listed in
// the test's log, and an entry whose example exists fails the test until it is removed here.
var pendingExamples = map[string]bool{}

// TestDocumentedSettingsHaveExamples: every setting the generated docs partials document
// (deprecated aliases aside) is written in at least one HCL example, in docs/ or in an example
// template, in the block it belongs to.
func TestDocumentedSettingsHaveExamples(t *testing.T) {
	set := map[string]bool{}
	for _, s := range append(docSnippets(t), exampleSnippets(t)...) {
		body, diags := parseSnippet(s)
		if diags.HasErrors() {
			t.Errorf("%s: %s", s.where, diags.Error())
			continue
		}
		for b, comp := range dlamiBodies(body, s.page) {
			exemplified(set, comp, "", b)
		}
	}
	var missing, stillPending []string
	total, deprecated := 0, 0
	for _, d := range documentedSettings(t) {
		ctxs, ok := partialContexts[d.partial]
		if !ok || ctxs == nil {
			continue
		}
		if d.deprecated {
			deprecated++
			continue
		}
		total++
		found := false
		for _, c := range ctxs {
			comp, path, _ := strings.Cut(c, ":")
			if path != "" {
				path += "."
			}
			if set[comp+":"+path+d.name] {
				found = true
			}
		}
		id := fmt.Sprintf("%s (%s)", d.name, strings.TrimSuffix(d.partial, ".mdx"))
		switch {
		case !found && pendingExamples[id]:
			stillPending = append(stillPending, id)
		case !found:
			missing = append(missing, id)
		case pendingExamples[id]:
			t.Errorf("%s has an example now: remove it from pendingExamples", id)
		}
	}
	if len(stillPending) > 0 {
		sort.Strings(stillPending)
		t.Logf("%d settings still wait for their example (pendingExamples): %s", len(stillPending), strings.Join(stillPending, ", "))
	}
	t.Logf("%d documented settings (%d deprecated aliases not counted), %d without an HCL example", total, deprecated, len(missing)+len(stillPending))
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("%d documented settings appear in no HCL example (docs/*.mdx ```hcl blocks or examples/*/*.pkr.hcl): add a short example in the block's section of its docs page:\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// dedent removes the indentation every non-blank line of src shares (an example shown as part
// of a build block), so that it can be compared with its formatted form.
func dedent(src string) string {
	lines := strings.Split(src, "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); common < 0 || n < common {
			common = n
		}
	}
	if common <= 0 {
		return src
	}
	for i, l := range lines {
		if len(l) >= common {
			lines[i] = l[common:]
		} else {
			lines[i] = strings.TrimLeft(l, " ")
		}
	}
	return strings.Join(lines, "\n")
}

// TestLandingPageNamesEveryComponent: the registry's landing page (.web-docs/README.md, built
// from docs/README.md) links every component that has docs, so no component is found only by
// those who already know it exists.
func TestLandingPageNamesEveryComponent(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", ".web-docs", "README.md"))
	if err != nil {
		t.Fatalf("%v: run `make generate`", err)
	}
	docs, err := filepath.Glob(filepath.Join("..", ".web-docs", "components", "*", "*", "README.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no component docs in .web-docs/components (%v): run `make generate`", err)
	}
	for _, d := range docs {
		slug := filepath.Base(filepath.Dir(d))
		typ := filepath.Base(filepath.Dir(filepath.Dir(d)))
		link := "/latest/components/" + typ + "/" + slug + ")"
		if !strings.Contains(string(readme), link) {
			t.Errorf(".web-docs/README.md (from docs/README.md) does not link the %s %q (%s)", typ, slug, link)
		}
	}
}

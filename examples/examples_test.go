// Package examples holds the example templates; its tests keep them valid with the real Packer
// and the real plugins, so an example in the docs never rots.
package examples

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	datasource "github.com/dlami-bake/packer-plugin-dlami/datasource/dlami"
	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	postprocessor "github.com/dlami-bake/packer-plugin-dlami/postprocessor/dlami"
	provisioner "github.com/dlami-bake/packer-plugin-dlami/provisioner/dlami"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

const (
	dlamiSource  = "github.com/dlami-bake/dlami"
	amazonSource = "github.com/hashicorp/amazon"
)

// dummyVars are values for the variables an example declares without a default; validation
// needs them, their content does not matter. "@KEY@" is replaced by a generated SSH key file
// (the ssh communicator reads the key while validating).
var dummyVars = map[string]map[string]string{
	"demo": {
		"aws_endpoint": "http://127.0.0.1:4566",
	},
	"eks-worker": {
		"kubernetes_patch": "1.34.2",
		"eks_build_date":   "2026-11-12",
	},
	"golden-slurm": {
		"enroot_deb_sha256":      strings.Repeat("a", 64),
		"enroot_caps_deb_sha256": strings.Repeat("b", 64),
		"pyxis_tarball_sha256":   strings.Repeat("c", 64),
	},
	"gb200-slurm": {
		"capacity_block_id": "cr-0123456789abcdef0",
		"subnet_id":         "subnet-0123456789abcdef0",
	},
	"rebake":    {},
	"two-phase": {},
}

// extraValidations are further `packer validate` runs of an example with other variables: the
// branches of its conditionals the defaults do not take.
var extraValidations = map[string][]map[string]string{
	"two-phase": {{
		"capacity_block": `{id = "cr-0123456789abcdef0", subnet_id = "subnet-0123456789abcdef0"}`,
	}},
}

// example is one example directory and what its templates require.
type example struct {
	name    string
	dir     string
	plugins map[string]string // required_plugins: local name -> source
}

func ciMode() bool { return os.Getenv("CI") == "true" }

// missing fails the test under CI=true and skips it otherwise: a missing prerequisite must not
// silently pass in CI, nor break a developer's `go test ./...` before `make tools dev`.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if ciMode() {
		t.Fatalf("precondition: "+format, args...)
	}
	t.Skipf("precondition: "+format+" (with CI=true this fails)", args...)
}

func loadExamples(t *testing.T) []example {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(e.Name(), "*.pkr.hcl"))
		if len(files) == 0 {
			continue
		}
		ex := example{name: e.Name(), dir: e.Name(), plugins: map[string]string{}}
		for _, f := range files {
			for k, v := range requiredPlugins(t, f) {
				ex.plugins[k] = v
			}
		}
		out = append(out, ex)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) == 0 {
		t.Fatal("no example directories with *.pkr.hcl found")
	}
	return out
}

// requiredPlugins reads packer { required_plugins { name = { source = "..." } } } of one file.
func requiredPlugins(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range parseTemplate(t, path).Blocks {
		if b.Type != "packer" {
			continue
		}
		for _, rp := range b.Body.Blocks {
			if rp.Type != "required_plugins" {
				continue
			}
			for name, attr := range rp.Body.Attributes {
				v, diags := attr.Expr.Value(nil)
				if diags.HasErrors() {
					t.Fatalf("%s: required_plugins.%s: %s", path, name, diags.Error())
				}
				if !v.Type().IsObjectType() || !v.Type().HasAttribute("source") {
					t.Fatalf("%s: required_plugins.%s has no source", path, name)
				}
				s := v.GetAttr("source")
				if s.Type() != cty.String || s.IsNull() {
					t.Fatalf("%s: required_plugins.%s.source is not a string", path, name)
				}
				out[name] = s.AsString()
				if !v.Type().HasAttribute("version") {
					t.Errorf("%s: required_plugins.%s has no version constraint", path, name)
				}
			}
		}
	}
	return out
}

// usesBlock reports whether any template of the example has a block of this type and label
// (e.g. source "amazon-ebs", provisioner "dlami", data "dlami"), at any depth.
func usesBlock(t *testing.T, dir, typ, label string) bool {
	t.Helper()
	return len(blocksOf(parseExample(t, dir), typ, label)) > 0
}

// TestExamplesDeclarePlugins checks, without Packer, that every example declares the dlami
// plugin by its source address and declares amazon wherever it uses an amazon-ebs source.
func TestExamplesDeclarePlugins(t *testing.T) {
	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			if got := ex.plugins["dlami"]; got != dlamiSource {
				t.Errorf("required_plugins.dlami.source = %q, want %q", got, dlamiSource)
			}
			if usesBlock(t, ex.dir, "source", "amazon-ebs") && ex.plugins["amazon"] != amazonSource {
				t.Errorf("uses amazon-ebs but required_plugins.amazon.source = %q, want %q", ex.plugins["amazon"], amazonSource)
			}
			if !usesBlock(t, ex.dir, "provisioner", "dlami") {
				t.Errorf("no provisioner \"dlami\" block")
			}
			if !usesBlock(t, ex.dir, "data", "dlami") {
				t.Errorf("no data \"dlami\" block")
			}
			if _, ok := dummyVars[ex.name]; !ok {
				t.Errorf("no entry in dummyVars: add the example's variables without defaults")
			}
		})
	}
}

// TestRebakeWorkflow checks the parts of the scheduled rebake workflow the docs promise.
func TestRebakeWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("rebake", "rebake.yml"))
	if err != nil {
		t.Fatal(err)
	}
	wf := string(b)
	for _, want := range []string{
		"schedule:", "cron:", "workflow_dispatch:", "matrix:", "region:", "instance_type:",
		"decide.*", "rebake_needed", "rebake.*",
		"actions/upload-artifact", "dlami-report.md", "$GITHUB_STEP_SUMMARY",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("rebake.yml lacks %q", want)
		}
	}
	if strings.Contains(wf, "\t") {
		t.Errorf("rebake.yml contains a tab: YAML forbids tabs for indentation")
	}
	// The JUnit report as a check run: the action pinned by a full commit SHA (a tag can be
	// moved), the permission a check run needs, and the reports it reads.
	junit := regexp.MustCompile(`(?m)^\s+uses: mikepenz/action-junit-report@([0-9a-f]{40})\s+# v\d+\.\d+\.\d+$`)
	if !junit.MatchString(wf) {
		t.Errorf("rebake.yml does not publish the JUnit report with mikepenz/action-junit-report pinned by a 40-hex commit SHA (with the version in a comment)")
	}
	for _, want := range []string{"checks: write", "/**/dlami-report.junit.xml", "require_tests: true"} {
		if !strings.Contains(wf, want) {
			t.Errorf("rebake.yml lacks %q", want)
		}
	}
	// The HTML reports as an artifact of their own, uploaded by an action pinned by its
	// commit; the Markdown report in the job summary; the previous run's bill of materials
	// handed to the bake.
	html := regexp.MustCompile(`(?m)^\s+uses: actions/upload-artifact@[0-9a-f]{40}\s+# v\d+\.\d+\.\d+\n\s+with:\n\s+name: dlami-report-html-.*\n\s+path: .*/\*\*/dlami-report\.html$`)
	if !html.MatchString(wf) {
		t.Errorf("rebake.yml does not upload the HTML reports (**/dlami-report.html) with actions/upload-artifact pinned by a commit SHA")
	}
	if !regexp.MustCompile(`cat "\$report" >>"\$GITHUB_STEP_SUMMARY"`).MatchString(wf) || !strings.Contains(wf, `report="$PKR_VAR_report_dir/dlami-report.md"`) {
		t.Errorf("rebake.yml does not write the Markdown report to the job summary")
	}
	if !strings.Contains(wf, "PKR_VAR_previous_bom_file=") {
		t.Errorf("rebake.yml does not hand the previous bill of materials to the bake")
	}
	// Every action is pinned by a version or a commit, never a branch.
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:- )?uses: ([^@\s]+)@(\S+)`).FindAllStringSubmatch(wf, -1) {
		if !regexp.MustCompile(`^(v\d+(\.\d+)*|[0-9a-f]{40})$`).MatchString(m[2]) {
			t.Errorf("rebake.yml: %s@%s is not pinned by a version tag or a commit SHA", m[1], m[2])
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// pluginInstalled reports whether a plugin with this source is installed in the plugin dir.
func pluginInstalled(dir, source string) bool {
	name := source[strings.LastIndex(source, "/")+1:]
	m, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(source), "packer-plugin-"+name+"_*"))
	for _, f := range m {
		if !strings.HasSuffix(f, "_SHA256SUM") {
			return true
		}
	}
	return false
}

func writeKey(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// invalidValidations are `packer validate` runs that must fail, with the text the error must
// contain: an example's own variable validations keep a user from a setting that cannot work.
var invalidValidations = map[string][]struct {
	vars    map[string]string
	wantErr string
}{
	"two-phase": {{
		vars:    map[string]string{"capacity_block": `{id = "cr-0123456789abcdef0", subnet_id = ""}`},
		wantErr: "subnet_id (subnet-..., in the block's Availability Zone",
	}},
	"golden-slurm": {{
		vars:    map[string]string{"pyxis_tarball_sha256": "sha256:abc"},
		wantErr: "pyxis_tarball_sha256 must be 64 lower-case hex digits",
	}},
	"gb200-slurm": {{
		vars:    map[string]string{"capacity_block_id": ""},
		wantErr: "p6e-gb200.36xlarge exists only inside an UltraServer Capacity Block",
	}},
}

// TestPackerValidate runs the real `packer validate` on every example with the real plugins
// installed: bin/packer (make tools), the dlami plugin (make dev) and, for amazon-ebs examples,
// the amazon plugin, all in PACKER_PLUGIN_PATH (default ../.packer-plugins). Each example is
// validated with its dummyVars, again with each of its extraValidations, and must be refused
// with each of its invalidValidations.
func TestPackerValidate(t *testing.T) {
	packer, pluginDir := packerPrereqs(t, dlamiSource)
	key := writeKey(t)

	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			for _, src := range ex.plugins {
				if !pluginInstalled(pluginDir, src) {
					missing(t, "plugin %s is not installed in %s: run `make tools dev`", src, pluginDir)
				}
			}
			validate := func(extra map[string]string) (string, error) {
				vars := map[string]string{}
				for k, v := range dummyVars[ex.name] {
					vars[k] = strings.ReplaceAll(v, "@KEY@", key)
				}
				for k, v := range extra {
					vars[k] = v
				}
				return packerValidate(t, packer, pluginDir, ex.dir, vars)
			}
			runs := append([]map[string]string{nil}, extraValidations[ex.name]...)
			for _, extra := range runs {
				out, err := validate(extra)
				if err != nil {
					t.Errorf("packer validate (in examples/%s, extra variables %v): %v\n%s", ex.name, extra, err, out)
					continue
				}
				if !strings.Contains(out, "The configuration is valid.") {
					t.Errorf("packer validate (extra variables %v) exited 0 without saying the configuration is valid:\n%s", extra, out)
				}
			}
			for _, bad := range invalidValidations[ex.name] {
				out, err := validate(bad.vars)
				if err == nil {
					t.Errorf("packer validate with %v passed; want it refused with %q:\n%s", bad.vars, bad.wantErr, out)
				} else if !strings.Contains(strings.Join(strings.Fields(out), " "), bad.wantErr) {
					t.Errorf("packer validate with %v failed without saying %q:\n%s", bad.vars, bad.wantErr, out)
				}
			}
		})
	}
}

// packerValidate runs `packer validate` in dir with vars, offline, and returns its output.
func packerValidate(t *testing.T, packer, pluginDir, dir string, vars map[string]string) (string, error) {
	t.Helper()
	args := []string{"validate", "-no-warn-undeclared-var"}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		args = append(args, "-var", k+"="+vars[k])
	}
	args = append(args, ".")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, packer, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PACKER_PLUGIN_PATH="+pluginDir,
		"PACKER_CHECKPOINT_DISABLE=1",
		"PACKER_LOG=",
		// Validation must not need real AWS credentials or reach the network.
		"AWS_EC2_METADATA_DISABLED=true",
	)
	var outBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	err := cmd.Run()
	return outBuf.String(), err
}

// packerBlockArgs are the arguments Packer itself handles in a provisioner or data block;
// the plugin never sees them.
var packerBlockArgs = []string{"only", "except", "max_retries", "timeout", "pause_before", "override"}

// stubFunctions returns, for every function any expression of body calls, a stand-in that
// accepts anything and returns an unknown value, so that decoding checks the block's shape
// (argument names, block nesting, types of literals) without evaluating Packer's functions.
func stubFunctions(body *hclsyntax.Body) map[string]function.Function {
	fns := map[string]function.Function{}
	stub := function.New(&function.Spec{
		VarParam: &function.Parameter{Type: cty.DynamicPseudoType, AllowUnknown: true, AllowNull: true, AllowDynamicType: true},
		Type:     function.StaticReturnType(cty.DynamicPseudoType),
		Impl:     func([]cty.Value, cty.Type) (cty.Value, error) { return cty.DynamicVal, nil },
	})
	_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
			fns[call.Name] = stub
		}
		return nil
	})
	return fns
}

// withPackerArgs adds the arguments Packer handles itself (packerBlockArgs) to spec.
func withPackerArgs(spec hcldec.ObjectSpec) hcldec.ObjectSpec {
	for _, a := range packerBlockArgs {
		spec[a] = &hcldec.AttrSpec{Name: a, Type: cty.DynamicPseudoType}
	}
	return spec
}

// evalContextFor is an evaluation context in which every variable root (var, local, data, ...)
// is unknown and every function body calls is a stub (stubFunctions): decoding then checks
// the shape of the blocks, not Packer's values.
func evalContextFor(body *hclsyntax.Body) *hcl.EvalContext {
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{},
		Functions: stubFunctions(body),
	}
	for _, root := range []string{"var", "local", "data", "path", "source", "build", "packer"} {
		ctx.Variables[root] = cty.DynamicVal
	}
	return ctx
}

// decodeBlocks decodes every block of type typ labelled "dlami" (at any depth) of every
// template in dir with spec, and returns how many it decoded.
func decodeBlocks(t *testing.T, dir, typ string, spec hcldec.ObjectSpec) int {
	t.Helper()
	spec = withPackerArgs(spec)
	n := 0
	for _, body := range parseExample(t, dir) {
		ctx := evalContextFor(body)
		for _, blk := range blocksOf([]*hclsyntax.Body{body}, typ, "dlami") {
			n++
			if _, diags := hcldec.Decode(blk.Body, spec, ctx); diags.HasErrors() {
				t.Errorf("%s: %s \"dlami\" block does not decode with the plugin's HCL2 spec: %s", blk.TypeRange.Filename, typ, diags.Error())
			}
		}
	}
	return n
}

// TestDLAMIBlocksDecode decodes every provisioner "dlami" and data "dlami" block of the
// examples with the plugin's generated HCL2 specs, without Packer: a renamed or misspelt
// argument fails here even where `packer validate` cannot run.
func TestDLAMIBlocksDecode(t *testing.T) {
	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			if n := decodeBlocks(t, ex.dir, "provisioner", hcldec.ObjectSpec((&provisioner.FlatConfig{}).HCL2Spec())); n == 0 {
				t.Errorf("no provisioner \"dlami\" block decoded")
			}
			if n := decodeBlocks(t, ex.dir, "data", hcldec.ObjectSpec((&datasource.FlatConfig{}).HCL2Spec())); n == 0 {
				t.Errorf("no data \"dlami\" block decoded")
			}
			// Not every example verifies its AMI (eks-worker does not); those that do decode.
			decodeBlocks(t, ex.dir, "post-processor", hcldec.ObjectSpec((&postprocessor.FlatConfig{}).HCL2Spec()))
		})
	}
}

// packerPrereqs returns the Packer binary and plugin directory, or fails/skips (see missing)
// when Packer or one of the plugins is not installed.
func packerPrereqs(t *testing.T, sources ...string) (packer, pluginDir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real Packer; skipped with -short")
	}
	root := repoRoot(t)
	packer = os.Getenv("PACKER")
	if packer == "" {
		packer = filepath.Join(root, "bin", "packer")
	}
	if _, err := os.Stat(packer); err != nil {
		missing(t, "%s not found: run `make tools`", packer)
	}
	pluginDir = os.Getenv("PACKER_PLUGIN_PATH")
	if pluginDir == "" {
		pluginDir = filepath.Join(root, ".packer-plugins")
	}
	// Held until the test ends: test/e2e may reinstall the plugin concurrently.
	t.Cleanup(sharePluginDir(t, pluginDir))
	for _, src := range sources {
		if !pluginInstalled(pluginDir, src) {
			missing(t, "plugin %s is not installed in %s: run `make tools dev`", src, pluginDir)
		}
	}
	return packer, pluginDir
}

// TestRebakeDecision runs the rebake example's `decide` build with the real Packer and plugin
// against the local fake AWS endpoint, and checks the decision the workflow acts on: a rebake
// when no golden AMI exists or it was baked from an older DLAMI, none when it is current.
func TestRebakeDecision(t *testing.T) {
	packer, pluginDir := packerPrereqs(t, dlamiSource, amazonSource)

	const region = "us-east-1"
	fake := awsfake.NewSeeded(region)
	srv := httptest.NewServer(fake)
	defer srv.Close()

	latest := awsfake.SeedBuilds[len(awsfake.SeedBuilds)-1]
	older := awsfake.SeedBuilds[len(awsfake.SeedBuilds)-2]
	baseID := func(build string) string {
		return awsfake.SeedAMIID(region, awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", build))
	}
	family := "golden-p6-b200-48xlarge" // rebake.pkr.hcl's local.family for the default instance type
	golden := func(id, source, created string) awsfake.Image {
		return awsfake.Image{
			ID: id, Name: family + "-" + strings.ReplaceAll(created[:16], ":", ""), OwnerID: awsfake.DefaultAccount,
			Architecture: "x86_64", CreationDate: created, RootDeviceName: "/dev/sda1",
			Tags: map[string]string{"dlami:family": family, "dlami:source_ami": source, "dlami:verified": "true"},
		}
	}

	type decision struct {
		RebakeNeeded bool   `json:"rebake_needed"`
		BaseAMIID    string `json:"base_ami_id"`
		BaseBuild    string `json:"base_build"`
		GoldenAMIID  string `json:"golden_ami_id"`
	}
	decide := func(t *testing.T) decision {
		t.Helper()
		out := filepath.Join(t.TempDir(), "decision.json")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, packer, "build", "-color=false", "-only=decide.*",
			"-var", "region="+region, "-var", "decision_file="+out, ".")
		cmd.Dir = "rebake"
		cmd.Env = append(os.Environ(),
			"PACKER_PLUGIN_PATH="+pluginDir, "PACKER_CHECKPOINT_DISABLE=1",
			"AWS_ENDPOINT_URL_SSM="+srv.URL, "AWS_ENDPOINT_URL_EC2="+srv.URL, "AWS_ENDPOINT_URL_STS="+srv.URL,
			"AWS_ACCESS_KEY_ID=AKIAFAKEEXAMPLES0000", "AWS_SECRET_ACCESS_KEY=fake",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_PROFILE=", "AWS_CONFIG_FILE="+os.DevNull,
			"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("packer build -only=decide.*: %v\n%s", err, b)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("decision file not written: %v\n%s", err, b)
		}
		var d decision
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("decision file %q: %v", raw, err)
		}
		if d.BaseAMIID != baseID(latest) || d.BaseBuild != latest {
			t.Fatalf("base = %s (build %s), want %s (build %s)", d.BaseAMIID, d.BaseBuild, baseID(latest), latest)
		}
		return d
	}

	t.Run("no golden AMI yet", func(t *testing.T) {
		if d := decide(t); !d.RebakeNeeded || d.GoldenAMIID != "" {
			t.Errorf("got %+v, want a rebake and no golden AMI", d)
		}
	})
	t.Run("golden baked from an older DLAMI", func(t *testing.T) {
		fake.PutImage(region, golden("ami-0aaaaaaaaaaaaaaa1", baseID(older), "2026-09-10T08:00:00.000Z"))
		if d := decide(t); !d.RebakeNeeded || d.GoldenAMIID != "ami-0aaaaaaaaaaaaaaa1" {
			t.Errorf("got %+v, want a rebake over ami-0aaaaaaaaaaaaaaa1", d)
		}
	})
	t.Run("unverified golden from the current DLAMI", func(t *testing.T) {
		g := golden("ami-0ccccccccccccccc3", baseID(latest), "2026-10-04T08:00:00.000Z")
		g.Tags["dlami:verified"] = "false"
		fake.PutImage(region, g)
		if d := decide(t); !d.RebakeNeeded || d.GoldenAMIID != "ami-0aaaaaaaaaaaaaaa1" {
			t.Errorf("got %+v, want a rebake over the verified ami-0aaaaaaaaaaaaaaa1 (the failed ami-0ccccccccccccccc3 does not count)", d)
		}
	})
	t.Run("golden baked from the current DLAMI", func(t *testing.T) {
		fake.PutImage(region, golden("ami-0bbbbbbbbbbbbbbb2", baseID(latest), "2026-10-05T08:00:00.000Z"))
		if d := decide(t); d.RebakeNeeded || d.GoldenAMIID != "ami-0bbbbbbbbbbbbbbb2" {
			t.Errorf("got %+v, want no rebake, golden ami-0bbbbbbbbbbbbbbb2", d)
		}
	})
}

// TestDocsCoverEverything checks the rendered docs (.web-docs, built from docs/ and the
// generated partials by `make generate`, whose freshness `make check-generate` enforces): every
// argument and output of the data source and every check ID has an entry, so a field added to a
// config struct cannot go undocumented.
func TestDocsCoverEverything(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("..", ".web-docs", "components", p, "README.md"))
		if err != nil {
			t.Fatalf("%v: run `make generate`", err)
		}
		return string(b)
	}
	ds := read("data-source/dlami")
	specs := map[string]map[string]hcldec.Spec{
		"argument":             (&datasource.FlatConfig{}).HCL2Spec(),
		"access argument":      (&awsaccess.FlatAccessConfig{}).HCL2Spec(),
		"golden argument":      (&datasource.FlatGoldenConfig{}).HCL2Spec(),
		"assume_role argument": (&awsaccess.FlatAssumeRoleConfig{}).HCL2Spec(),
		"output":               (&datasource.FlatDatasourceOutput{}).HCL2Spec(),
	}
	for kind, spec := range specs {
		for name := range spec {
			if !strings.Contains(ds, "- `"+name+"` (") {
				t.Errorf("docs/datasources/dlami.mdx (rendered) does not document the data source %s %q", kind, name)
			}
		}
	}
	prov := read("provisioner/dlami")
	for _, e := range checks.Catalog() {
		id := e.ID
		if !strings.Contains(prov, "| `"+id+"` |") {
			t.Errorf("docs/provisioners/dlami.mdx (rendered) has no row for check ID %q", id)
		}
	}
	for name := range (&provisioner.FlatConfig{}).HCL2Spec() {
		// packer_* are common.PackerConfig fields Packer fills in, not user arguments.
		if strings.HasPrefix(name, "packer_") {
			continue
		}
		if !strings.Contains(prov, "- `"+name+"` (") {
			t.Errorf("docs/provisioners/dlami.mdx (rendered) does not document the provisioner argument %q", name)
		}
	}
}

// parseExample parses every template of dir.
func parseExample(t *testing.T, dir string) []*hclsyntax.Body {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pkr.hcl"))
	var out []*hclsyntax.Body
	for _, path := range files {
		out = append(out, parseTemplate(t, path))
	}
	return out
}

// parseTemplate parses one template file.
func parseTemplate(t *testing.T, path string) *hclsyntax.Body {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatalf("%s: %s", path, diags.Error())
	}
	return f.Body.(*hclsyntax.Body)
}

// blocksOf returns the blocks of type typ (and first label, when label is set) at any depth.
func blocksOf(bodies []*hclsyntax.Body, typ, label string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	var walk func(*hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, blk := range b.Blocks {
			if blk.Type == typ && (label == "" || len(blk.Labels) > 0 && blk.Labels[0] == label) {
				out = append(out, blk)
			}
			walk(blk.Body)
		}
	}
	for _, b := range bodies {
		walk(b)
	}
	return out
}

// TestExamplesPinTheBuildTheyExpect: an example whose expect block names the kernel or the
// NVIDIA driver exactly (not a ">=" floor) must pin the DLAMI build those belong to; with the
// latest DLAMI, the first build AWS publishes after the example was written fails its bake.
func TestExamplesPinTheBuildTheyExpect(t *testing.T) {
	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			bodies := parseExample(t, ex.dir)
			var pinned []string
			for _, e := range blocksOf(bodies, "expect", "") {
				for _, name := range []string{"kernel", "nvidia_driver"} {
					attr, ok := e.Body.Attributes[name]
					if !ok {
						continue
					}
					v, diags := attr.Expr.Value(nil)
					if !diags.HasErrors() && v.Type() == cty.String && strings.ContainsAny(v.AsString(), "<>=~*") {
						continue // a floor or a range, not one build's version
					}
					pinned = append(pinned, "expect."+name)
				}
			}
			if len(pinned) == 0 {
				return
			}
			for _, d := range blocksOf(bodies, "data", "dlami") {
				if _, ok := d.Body.Attributes["build"]; !ok {
					t.Errorf("%s pinned, but data \"dlami\" %q resolves the latest DLAMI: set build (the build those versions belong to)", strings.Join(pinned, " and "), d.Labels[1])
				}
			}
		})
	}
}

// TestExamplesKeepTheArtifactWhenVerificationCannotJudge: a build with the dlami post-processor
// must have a post-processor sequence of its own that keeps the artifact (a manifest). Packer
// destroys a build's AMI after any failed post-processor unless another sequence kept it (it
// reads keep_input_artifact only from post-processors that succeeded), and the post-processor
// fails the build when it could not judge the first boot: without the manifest, an AMI that may
// be good is deregistered.
func TestExamplesKeepTheArtifactWhenVerificationCannotJudge(t *testing.T) {
	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			for _, b := range blocksOf(parseExample(t, ex.dir), "build", "") {
				if len(blocksOf([]*hclsyntax.Body{b.Body}, "post-processor", "dlami")) == 0 {
					continue
				}
				keeps := false
				for _, pp := range b.Body.Blocks {
					// A top-level post-processor block is a sequence of its own; so is the first of
					// a post-processors block.
					first := pp
					if pp.Type == "post-processors" && len(pp.Body.Blocks) > 0 {
						first = pp.Body.Blocks[0]
					}
					if first.Type == "post-processor" && len(first.Labels) > 0 && first.Labels[0] == "manifest" {
						keeps = true
					}
				}
				if !keeps {
					t.Errorf("a build with post-processor \"dlami\" has no post-processor \"manifest\" sequence of its own: Packer deregisters the AMI when the verification could not judge it")
				}
			}
		})
	}
}

// TestGoldenSlurmIsWhatAFleetRuns: the fuller example keeps what a platform team copies into
// production: the node check every boot runs before slurmd, the image cleaned of the build's
// identity, an encrypted, IMDSv2-only AMI with a deprecation date.
func TestGoldenSlurmIsWhatAFleetRuns(t *testing.T) {
	bodies := parseExample(t, "golden-slurm")
	sources := blocksOf(bodies, "source", "amazon-ebs")
	provs := blocksOf(bodies, "provisioner", "dlami")
	if len(sources) != 1 || len(provs) != 1 {
		t.Fatalf("want one amazon-ebs source and one dlami provisioner, got %d and %d", len(sources), len(provs))
	}
	literal := func(b *hclsyntax.Block, name string) (cty.Value, bool) {
		attr, ok := b.Body.Attributes[name]
		if !ok {
			return cty.NilVal, false
		}
		v, diags := attr.Expr.Value(nil)
		return v, !diags.HasErrors()
	}
	src := sources[0]
	if v, ok := literal(src, "imds_support"); !ok || v.Type() != cty.String || v.AsString() != "v2.0" {
		t.Errorf(`source "amazon-ebs": imds_support is not "v2.0"`)
	}
	if v, ok := literal(src, "encrypt_boot"); !ok || v.Type() != cty.Bool || !v.True() {
		t.Errorf(`source "amazon-ebs": encrypt_boot is not true`)
	}
	for _, name := range []string{"kms_key_id", "deprecate_at"} {
		if _, ok := src.Body.Attributes[name]; !ok {
			t.Errorf(`source "amazon-ebs": no %s`, name)
		}
	}
	p := provs[0]
	if v, ok := literal(p, "image_hygiene"); !ok || v.Type() != cty.Bool || !v.True() {
		t.Errorf(`provisioner "dlami": image_hygiene is not true`)
	}
	if len(blocksOf([]*hclsyntax.Body{p.Body}, "node_check", "")) != 1 {
		t.Errorf(`provisioner "dlami": no node_check block`)
	}
}

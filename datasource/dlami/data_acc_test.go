package dlami

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

const pluginAddress = "github.com/dlami-bake/dlami"

// prerequisite skips the test, or fails it when CI=true, because something
// the end-to-end test needs is missing.
func prerequisite(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("end-to-end prerequisite missing (CI=true makes this fatal): "+format, args...)
	}
	t.Skipf("end-to-end prerequisite missing: "+format, args...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// findPacker prefers $PACKER, then the repo's bin/packer (make tools), then PATH.
func findPacker(t *testing.T, root string) string {
	t.Helper()
	for _, p := range []string{os.Getenv("PACKER"), filepath.Join(root, "bin", "packer")} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("packer"); err == nil {
		return p
	}
	prerequisite(t, "no packer binary (set PACKER, run `make tools` for bin/packer, or put packer on PATH)")
	return ""
}

const fallbackMain = `package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/packer-plugin-sdk/plugin"

	"github.com/dlami-bake/packer-plugin-dlami/datasource/dlami"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

func main() {
	pps := plugin.NewSet()
	pps.RegisterDatasource(plugin.DEFAULT_NAME, new(dlami.Datasource))
	pps.SetVersion(version.PluginVersion)
	if err := pps.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
		os.Exit(1)
	}
}
`

// buildPlugin builds the plugin from the repository root. When the root
// package does not build (another component mid-change), it builds a
// data-source-only main through a go build -overlay, so nothing is written
// into the repository.
func buildPlugin(t *testing.T, root, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "packer-plugin-dlami")
	// DLAMI_E2E_DATASOURCE_ONLY=1 skips the repository's main package.
	if os.Getenv("DLAMI_E2E_DATASOURCE_ONLY") != "1" {
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err == nil {
			return bin
		}
		t.Logf("building the repository's main package failed, using a data-source-only main:\n%s", out)
	}
	mainFile := filepath.Join(dir, "main.go")
	if err := os.WriteFile(mainFile, []byte(fallbackMain), 0o644); err != nil {
		t.Fatal(err)
	}
	virtual := filepath.Join(root, "datasource", "dlami", "internal", "e2emain", "main.go")
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, []byte(`{"Replace":{"`+virtual+`":"`+mainFile+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlay, "-o", bin, "./datasource/dlami/internal/e2emain")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin failed: %v\n%s", err, out)
	}
	return bin
}

type packerRun struct {
	packer string
	env    []string
	dir    string
}

func (p *packerRun) run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.packer, args...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestAccDatasourceThroughPacker runs the data source in the real Packer:
// packer build with null + shell-local echoing the outputs, and packer
// console evaluating rebake_needed, against the in-process fake endpoint.
func TestAccDatasourceThroughPacker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	root := repoRoot(t)
	packer := findPacker(t, root)
	if _, err := exec.LookPath("go"); err != nil {
		prerequisite(t, "no go toolchain on PATH to build the plugin")
	}
	work := t.TempDir()
	plugin := buildPlugin(t, root, work)

	awstest.IsolateEnv(t)
	env := append(os.Environ(),
		"PACKER_PLUGIN_PATH="+filepath.Join(work, "plugins"),
		"PACKER_CONFIG_DIR="+filepath.Join(work, "config"),
		"PACKER_CACHE_DIR="+filepath.Join(work, "cache"),
		"PACKER_CHECKPOINT_DISABLE=1",
		"PACKER_NO_COLOR=1",
		"AWS_ACCESS_KEY_ID=AKIAFAKEE2E000000001",
		"AWS_SECRET_ACCESS_KEY=fake-secret-e2e",
		"AWS_EC2_METADATA_DISABLED=true",
	)
	p := &packerRun{packer: packer, env: env, dir: filepath.Join(root, "datasource", "dlami", "test-fixtures")}
	if out, err := p.run(t, "", "plugins", "install", "--path", plugin, pluginAddress); err != nil {
		t.Fatalf("packer plugins install: %v\n%s", err, out)
	}

	fake := awsfake.NewSeeded("us-east-1", "eu-west-1")
	srv := fake.Start()
	defer srv.Close()
	seedID := func(region string) string {
		return awsfake.SeedAMIID(region, awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20261002"))
	}
	goldenIDs := map[string]string{"us-east-1": "ami-0golden00000use1", "eu-west-1": "ami-0golden00000euw1"}
	golden := func(region, source string) {
		fake.PutImage(region, awsfake.Image{ID: goldenIDs[region], Name: "ml-golden-20261003",
			OwnerID: awsfake.DefaultAccount, Architecture: "x86_64", CreationDate: "2026-10-03T00:00:00.000Z",
			Tags: map[string]string{"dlami:source_ami": source, "dlami:verified": "true"}})
	}
	golden("us-east-1", seedID("us-east-1"))
	golden("eu-west-1", seedID("eu-west-1"))
	vars := []string{"-var", "aws_endpoint=" + srv.URL}

	t.Run("packer validate", func(t *testing.T) {
		for _, extra := range [][]string{nil, {"-evaluate-datasources"}} {
			args := append(append(append([]string{"validate"}, extra...), vars...), "template.pkr.hcl")
			if out, err := p.run(t, "", args...); err != nil {
				t.Errorf("packer validate %v: %v\n%s", extra, err, out)
			}
		}
		// Configure rejects a bad value even when data sources are not run.
		args := append(append([]string{"validate"}, vars...), "-var", "architecture=amd64", "template.pkr.hcl")
		out, err := p.run(t, "", args...)
		if err == nil || !strings.Contains(out, `architecture "amd64": must be one of x86_64, arm64 (did you mean "x86_64"?)`) {
			t.Errorf("packer validate with architecture=amd64: err %v\n%s", err, out)
		}
	})

	t.Run("packer build echoes the outputs", func(t *testing.T) {
		args := append(append([]string{"build", "-color=false"}, vars...), "template.pkr.hcl")
		out, err := p.run(t, "", args...)
		if err != nil {
			t.Fatalf("packer build: %v\n%s", err, out)
		}
		for _, want := range []string{
			"DLAMI_AMI_ID=" + seedID("us-east-1"),
			"DLAMI_BUILD=20261002",
			"DLAMI_ROOT_DEVICE=/dev/sda1",
			"DLAMI_EU_WEST_1=" + seedID("eu-west-1"),
			"DLAMI_REBAKE_NEEDED=false",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("packer build output lacks %q:\n%s", want, out)
			}
		}
	})

	// The builder's instance_type, read with DescribeInstanceTypes: an image the type cannot
	// run fails the build at the data source, before any source starts, naming the settings.
	t.Run("packer build refuses an instance type the image cannot run", func(t *testing.T) {
		for _, tc := range []struct {
			arch, typ string
			want      []string
		}{
			{"arm64", "p6-b200.48xlarge", []string{"is arm64 but p6-b200.48xlarge runs only x86_64", "change architecture or instance_type"}},
			{"x86_64", "g6f.large", []string{`instance_type = "g6f.large"`, "fraction of one GPU"}},
		} {
			args := append(append([]string{"build", "-color=false"}, vars...), "-var", "architecture="+tc.arch, "-var", "instance_type="+tc.typ, "template.pkr.hcl")
			out, err := p.run(t, "", args...)
			if err == nil {
				t.Errorf("%s on %s: packer build passed:\n%s", tc.arch, tc.typ, out)
				continue
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, w := range tc.want {
				if !strings.Contains(flat, w) {
					t.Errorf("%s on %s: output lacks %q:\n%s", tc.arch, tc.typ, w, out)
				}
			}
			if strings.Contains(out, "DLAMI_AMI_ID=") {
				t.Errorf("%s on %s: the build ran past the data source:\n%s", tc.arch, tc.typ, out)
			}
		}
	})

	probe := func(t *testing.T) string {
		t.Helper()
		args := append(append([]string{"build", "-color=false", "-only=rebake-probe.null.e2e"}, vars...), "template.pkr.hcl")
		out, err := p.run(t, "", args...)
		if err != nil {
			t.Fatalf("packer build -only=rebake-probe: %v\n%s", err, out)
		}
		if strings.Contains(out, "DLAMI_AMI_ID=") {
			t.Errorf("-only=rebake-probe also ran the e2e build:\n%s", out)
		}
		return out
	}

	t.Run("rebake probe build reports rebake_needed", func(t *testing.T) {
		if out := probe(t); !strings.Contains(out, "REBAKE_NEEDED=false GOLDEN="+goldenIDs["us-east-1"]) {
			t.Errorf("with current goldens want REBAKE_NEEDED=false:\n%s", out)
		}
		// A new DLAMI build lands in eu-west-1: its golden is now stale.
		fake.PutParameter("eu-west-1", awsfake.Parameter{
			Name:  "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
			Value: awsfake.SeedAMIID("eu-west-1", awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20260904")),
		})
		if out := probe(t); !strings.Contains(out, "REBAKE_NEEDED=true") {
			t.Errorf("with a stale golden in eu-west-1 want REBAKE_NEEDED=true:\n%s", out)
		}
	})

	// Packer 1.16.0's console never calls DetectPluginBinaries (only build
	// and validate do) and evaluates input with EvalContext(NilContext), so
	// plugin data sources are out of reach there. This pins that behaviour:
	// should a Packer release evaluate them, the value must be right.
	t.Run("packer console and plugin data sources", func(t *testing.T) {
		for _, expr := range []string{"data.dlami.base.rebake_needed", "local.rebake_needed"} {
			args := append(append([]string{"console"}, vars...), "template.pkr.hcl")
			out, err := p.run(t, expr+"\n", args...)
			switch {
			case err == nil && strings.TrimSpace(out) == "true":
				t.Logf("%s = true: this Packer evaluates plugin data sources in console", expr)
			case err != nil && (strings.Contains(out, `There is no variable named "data"`) || strings.Contains(out, `does not have an attribute named "rebake_needed"`)):
				t.Logf("packer console cannot evaluate %s (Packer 1.16 limitation): %s", expr, lastLine(out))
			default:
				t.Errorf("packer console %s: unexpected result (err %v):\n%s", expr, err, out)
			}
		}
	})

	throttledSSMScenario(t, p, fake, vars, seedID("us-east-1"))

	t.Run("packer build fails with the IAM hint", func(t *testing.T) {
		fake.SetFault(awsfake.OpGetParameter, "eu-west-1", awsfake.Fault{AccessDenied: true})
		defer fake.ClearFaults()
		args := append(append([]string{"build", "-color=false"}, vars...), "template.pkr.hcl")
		out, err := p.run(t, "", args...)
		if err == nil {
			t.Fatalf("packer build succeeded despite AccessDenied:\n%s", out)
		}
		for _, want := range []string{"1 of 2 regions failed (eu-west-1)", `allow action "ssm:GetParameter"`, "arn:aws:ssm:eu-west-1::parameter/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"} {
			if !strings.Contains(out, want) {
				t.Errorf("packer build output lacks %q:\n%s", want, out)
			}
		}
	})
}

// throttledSSMScenario is the throttled-ssm scenario: SSM's public
// parameters are rate-limited per account, and a CI matrix of regions and
// instance types meets ThrottlingException in bursts. A burst must be
// absorbed; a throttle that outlasts `timeout` must fail with the message
// that says what to do.
func throttledSSMScenario(t *testing.T, p *packerRun, fake *awsfake.Server, vars []string, wantAMI string) {
	const region = "us-east-1"
	t.Run("throttled-ssm: six ThrottlingExceptions in a row are absorbed", func(t *testing.T) {
		fake.SetFault(awsfake.OpGetParameter, region, awsfake.Fault{Throttle: 6})
		defer fake.ClearFaults()
		before := fake.CallCount(awsfake.OpGetParameter, region)
		logged := *p
		logged.env = append(append([]string(nil), p.env...), "PACKER_LOG=1")
		args := append(append([]string{"build", "-color=false", "-only=e2e.null.e2e"}, vars...), "template.pkr.hcl")
		out, err := logged.run(t, "", args...)
		if err != nil {
			t.Fatalf("packer build under 6 throttles: %v\n%s", err, out)
		}
		if !strings.Contains(out, "DLAMI_AMI_ID="+wantAMI) {
			t.Errorf("packer build output lacks DLAMI_AMI_ID=%s:\n%s", wantAMI, out)
		}
		if n := fake.CallCount(awsfake.OpGetParameter, region) - before; n != 7 {
			t.Errorf("GetParameter calls in %s = %d, want 7 (6 throttled + 1)", region, n)
		}
		if !strings.Contains(out, "[INFO] dlami: ssm GetParameter us-east-1: 6 throttled retries, ") {
			t.Errorf("the Packer log lacks the retry count line")
		}
	})
	t.Run("throttled-ssm: a permanent throttle fails at the short timeout with the message", func(t *testing.T) {
		fake.SetFault(awsfake.OpGetParameter, region, awsfake.Fault{Throttle: 1_000_000})
		defer fake.ClearFaults()
		args := append(append([]string{"build", "-color=false", "-only=e2e.null.e2e"}, vars...), "-var", "timeout=3s", "template.pkr.hcl")
		start := time.Now()
		out, err := p.run(t, "", args...)
		if err == nil {
			t.Fatalf("packer build succeeded under a permanent throttle:\n%s", out)
		}
		for _, want := range []string{
			"1 of 2 regions failed (us-east-1)",
			"us-east-1: ssm:GetParameter was still throttled by AWS (ThrottlingException: Rate exceeded) at the per-call timeout of 3s",
			"throttled retries", "SSM request rate limit in us-east-1 is exhausted",
			"raise timeout (and execute_timeout)", "spread the CI matrix", "or pin build",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("packer build output lacks %q:\n%s", want, out)
			}
		}
		// Throttles are retried until the deadline, not given up early.
		if took := time.Since(start); took < 3*time.Second || took > time.Minute {
			t.Errorf("the throttled build took %s; want the 3s timeout to end it", took)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

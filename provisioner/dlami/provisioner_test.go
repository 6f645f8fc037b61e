package dlami

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

var _ packersdk.Provisioner = new(Provisioner)

func TestPrepareDefaults(t *testing.T) {
	var p Provisioner
	if err := p.Prepare(map[string]interface{}{"packer_build_name": "golden"}); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	o := p.opt
	if o.ReportDir != "dlami-reports/golden" || !o.Validate || o.CheckTimeout != time.Minute ||
		o.RemoteFolder != "/tmp" || o.ManifestPath != "/etc/dlami-bake/manifest.json" || o.RebootTimeout != 10*time.Minute {
		t.Errorf("unexpected defaults: %+v", o)
	}
	// The NVMe path, the NCCL arguments and timeout are left to their owners (checks,
	// settings), which fill them in where they are used.
	if o.Checks.Expect.NVMeMount() != "/opt/dlami/nvme" || o.Checks.NCCL.Timeout != 0 || len(o.Checks.NCCL.Args) != 0 {
		t.Errorf("defaults copied instead of owned by checks and settings: %+v", o)
	}
	n, err := o.Checks.NCCL.Resolved()
	if err != nil || n.Timeout != 15*time.Minute || strings.Join(n.Args, " ") != "-b 8 -e 1G -f 2 -g 1 -c 1 -n 50" {
		t.Errorf("NCCL defaults: %v %+v", err, n)
	}
}

// imex reaches the judges as written; unset stays unset until the instance type is known.
func TestPrepareIMEX(t *testing.T) {
	for _, tc := range []struct {
		raw  map[string]interface{}
		want settings.IMEX
	}{
		{map[string]interface{}{}, settings.IMEXUnset},
		{map[string]interface{}{"imex": "dra"}, settings.IMEXDRA},
		{map[string]interface{}{"imex": "off"}, settings.IMEXOff},
		{map[string]interface{}{"imex": "host"}, settings.IMEXHost},
	} {
		var p Provisioner
		if err := p.Prepare(tc.raw); err != nil {
			t.Fatalf("%v: %v", tc.raw, err)
		}
		if p.opt.Checks.IMEX != tc.want {
			t.Errorf("%v: imex %q, want %q", tc.raw, p.opt.Checks.IMEX, tc.want)
		}
	}
}

// defer_validation defaults to false and reaches the bake; with validate = true it is fine.
func TestPrepareDeferValidation(t *testing.T) {
	var p Provisioner
	if err := p.Prepare(map[string]interface{}{}); err != nil || p.opt.DeferValidation {
		t.Fatalf("default: %v, defer %v", err, p.opt.DeferValidation)
	}
	p = Provisioner{}
	if err := p.Prepare(map[string]interface{}{"defer_validation": true, "validate": true}); err != nil || !p.opt.DeferValidation || !p.opt.Validate {
		t.Fatalf("defer_validation = true: %v, %+v", err, p.opt)
	}
}

func TestRunUUID(t *testing.T) {
	if got := runUUID(map[string]interface{}{"PackerRunUUID": "abc"}); got != "abc" {
		t.Errorf("from generated data: %q", got)
	}
	t.Setenv("PACKER_RUN_UUID", "from-env")
	if got := runUUID(map[string]interface{}{}); got != "from-env" {
		t.Errorf("from env: %q", got)
	}
}

// The build instance's id is the builder's (Packer's build.ID) when it is an EC2 instance id.
func TestBuilderInstanceID(t *testing.T) {
	for _, tc := range []struct {
		id   any
		want string
	}{
		{"i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"ERR_ID_NOT_IMPLEMENTED_BY_BUILDER", ""}, // a builder without instance_id
		{"3f4e5d6c7b8a", ""},                      // docker's container id
		{nil, ""},
		{42, ""},
	} {
		if got := builderInstanceID(map[string]interface{}{"ID": tc.id}); got != tc.want {
			t.Errorf("ID %v: %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestPrepareFullConfig(t *testing.T) {
	var p Provisioner
	raw := map[string]interface{}{
		"report_dir":    "out",
		"validate":      false,
		"check_timeout": "5s",
		"layer": []map[string]interface{}{{
			"name":          "slurm",
			"apt_packages":  []string{"slurmd", "munge"},
			"scripts":       []string{"test-fixtures/hello.sh"},
			"environment":   map[string]string{"TOKEN": "s3cret"},
			"reboot":        true,
			"expect_reboot": true,
		}},
		"require_holds": true,
		"expect":        map[string]interface{}{"efa_driver": ">= 3.3.0", "gpu_count": 8, "fabric_manager": true, "ignore_xids": []int{31}},
		"nccl":          map[string]interface{}{"cuda_version": "13.2", "timeout": "20s", "transport": "any"},
	}
	if err := p.Prepare(raw); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	o := p.opt
	if o.Validate || o.CheckTimeout != 5*time.Second || len(o.Layers) != 1 || !o.Layers[0].Reboot ||
		o.Checks.Expect.GPUCount != 8 || o.Checks.Expect.FabricManager == nil || !*o.Checks.Expect.FabricManager ||
		o.Checks.NCCL.Timeout != 20*time.Second || o.Checks.NCCL.CUDAVersion != "13.2" || len(o.Checks.Expect.IgnoreXids) != 1 ||
		!o.Layers[0].ExpectReboot || !o.RequireHolds || o.Checks.NCCL.Transport != "any" {
		t.Errorf("config not carried through: %+v", o)
	}
}

func TestPrepareRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"bad constraint", map[string]interface{}{"expect": map[string]interface{}{"efa_driver": ">=> 3"}}, "expect.efa_driver"},
		{"negative gpu count", map[string]interface{}{"expect": map[string]interface{}{"gpu_count": -2}}, "expect.gpu_count"},
		{"bad transport", map[string]interface{}{"nccl": map[string]interface{}{"transport": "ib"}}, "nccl.transport"},
		{"hold and require", map[string]interface{}{"hold_unheld": true, "require_holds": true}, "choose one"},
		{"relative nvme path", map[string]interface{}{"expect": map[string]interface{}{"nvme_path": "mnt"}}, "expect.nvme_path"},
		{"layer without name", map[string]interface{}{"layer": []map[string]interface{}{{"inline": []string{"true"}}}}, "name is required"},
		{"duplicate layer", map[string]interface{}{"layer": []map[string]interface{}{{"name": "a"}, {"name": "a"}}}, "used twice"},
		{"missing script", map[string]interface{}{"layer": []map[string]interface{}{{"name": "a", "scripts": []string{"nope.sh"}}}}, "scripts[0]"},
		{"bad package", map[string]interface{}{"layer": []map[string]interface{}{{"name": "a", "apt_packages": []string{"$(reboot)"}}}}, "apt_packages[0]"},
		{"bad cuda", map[string]interface{}{"nccl": map[string]interface{}{"cuda_version": "13.2; rm"}}, "nccl.cuda_version"},
		{"relative remote folder", map[string]interface{}{"remote_folder": "tmp"}, "remote_folder"},
		{"tiny check timeout", map[string]interface{}{"check_timeout": "1ms"}, "check_timeout"},
		{"bad nccl env", map[string]interface{}{"nccl": map[string]interface{}{"env": map[string]string{"A B": "x"}}}, "nccl"},
		{"bad guard glob", map[string]interface{}{"guard": map[string]interface{}{"include": []string{"linux-[image"}}}, "guard"},
		{"defer without validation", map[string]interface{}{"defer_validation": true, "validate": false}, "defer_validation = true and validate = false"},
		{"missing previous bom", map[string]interface{}{"previous_bom_file": "testdata/no-such-bom.json"}, "previous_bom_file"},
		{"previous bom not a bom", map[string]interface{}{"previous_bom_file": "provisioner_test.go"}, "previous_bom_file provisioner_test.go: bill of materials"},
		{"bad imex", map[string]interface{}{"imex": "slurm"}, `imex = "slurm": use "host"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Provisioner
			err := p.Prepare(tt.raw)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want error naming %q, got %v", tt.want, err)
			}
		})
	}
}

// Every problem of the nccl block names the setting as the template spells it, never a field
// of the options package checks validates.
func TestNCCLErrorsNameTheSetting(t *testing.T) {
	goField := regexp.MustCompile(`CUDAVersion|Transport|Ranks|Timeout\b|Args|Env`)
	for _, tc := range []struct {
		name string
		nccl map[string]interface{}
		want string
	}{
		{"cuda_version", map[string]interface{}{"cuda_version": "13"}, "nccl.cuda_version"},
		{"transport", map[string]interface{}{"transport": "ib"}, "nccl.transport"},
		{"too many ranks", map[string]interface{}{"ranks": 100000}, "nccl.ranks"},
		{"negative ranks", map[string]interface{}{"ranks": -1}, "nccl.ranks"},
		{"timeout over a day", map[string]interface{}{"timeout": "1000h"}, "nccl.timeout"},
		{"timeout under a second", map[string]interface{}{"timeout": "1ms"}, "nccl.timeout"},
		{"args", map[string]interface{}{"args": []string{"-b", "8\n"}}, "nccl.args[1]"},
		{"env key", map[string]interface{}{"env": map[string]string{"A B": "x"}}, "nccl.env key"},
		{"reserved env key", map[string]interface{}{"env": map[string]string{"NCCL_DEBUG": "WARN"}}, "nccl.env key"},
		{"env value", map[string]interface{}{"env": map[string]string{"X": "a\nb"}}, `nccl.env["X"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Provisioner
			err := p.Prepare(map[string]interface{}{"nccl": tc.nccl})
			if err == nil || !strings.Contains(err.Error(), tc.want) || goField.MatchString(err.Error()) {
				t.Fatalf("err %v: want one naming %s and no Go field", err, tc.want)
			}
			if n := strings.Count(err.Error(), "nccl."); n != 1 {
				t.Errorf("err %v: %d messages, want one", err, n)
			}
		})
	}
}

// remote_folder reaches the remote shell unquoted: only a plain absolute path passes Prepare.
func TestPrepareRemoteFolder(t *testing.T) {
	for _, tc := range []struct {
		v, want string // want: "" for accepted
	}{
		{"/var/tmp/dlami", ""},
		{"/tmp/x;id>/tmp/pwned;", "use only letters, digits"},
		{"/tmp/$(id)", "use only letters, digits"},
		{"/tmp/with space", "use only letters, digits"},
		{"/tmp/../etc", `must not contain ".."`},
		{"tmp", "must be an absolute path"},
	} {
		var p Provisioner
		err := p.Prepare(map[string]interface{}{"remote_folder": tc.v})
		if tc.want == "" {
			if err != nil || p.opt.RemoteFolder != tc.v {
				t.Errorf("%q: %v, remote folder %q", tc.v, err, p.opt.RemoteFolder)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "remote_folder") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one naming remote_folder and saying %q", tc.v, err, tc.want)
		}
	}
}

// Errors come in the same order every time, one per bad setting.
func TestPrepareErrorsAreOrdered(t *testing.T) {
	raw := map[string]interface{}{
		"check_timeout": "1ms",
		"expect":        map[string]interface{}{"nvidia_driver": ">=> 1", "efa_driver": ">=> 2", "gdrcopy": "~~"},
	}
	var first string
	for i := 0; i < 10; i++ {
		var p Provisioner
		err := p.Prepare(raw)
		if err == nil {
			t.Fatal("accepted")
		}
		if i == 0 {
			first = err.Error()
			want := []string{"check_timeout", "expect.nvidia_driver", "expect.efa_driver", "expect.gdrcopy"}
			last := -1
			for _, w := range want {
				at := strings.Index(first, w)
				if at < last {
					t.Fatalf("%s out of order in %q", w, first)
				}
				last = at
			}
		} else if err.Error() != first {
			t.Fatalf("error order changed:\n%s\n%s", first, err)
		}
	}
}

// The ec2 block: skip turns DescribeInstanceTypes off; otherwise the bake gets a reader, and
// one without AWS access says so (the instance-type check then warns, never passes).
func TestEC2Describer(t *testing.T) {
	if (EC2Config{Skip: true}).describer(nil) != nil {
		t.Fatal("ec2.skip = true still reads DescribeInstanceTypes")
	}
	e := EC2Config{AccessConfig: awsaccess.AccessConfig{AccessKey: "AKIAFAKE", SecretKey: "fake", CustomEndpointEC2: "http://127.0.0.1:1", STSEndpoint: "http://127.0.0.1:1", SkipMetadataAPICheck: true}}
	if errs := e.prepare(); len(errs) > 0 {
		t.Fatal(errs)
	}
	d := e.describer(map[string]interface{}{"BuildRegion": "us-east-1"})
	if d == nil {
		t.Fatal("no reader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d(ctx, "p5.48xlarge"); err == nil {
		t.Fatal("an unreachable endpoint read as a description")
	}
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	if _, err := e.describer(nil)(ctx, "p5.48xlarge"); err == nil || !strings.Contains(err.Error(), "set ec2.region") {
		t.Fatalf("no region: %v", err)
	}
}

// The ec2 block's reader through the real SDK against the fake EC2: EC2's description of a
// type (GPUs, memory, NVMe from InstanceStorageInfo, architecture), a fractional type as EC2
// answers it, and a denial named as such.
func TestEC2DescriberAgainstTheFake(t *testing.T) {
	awstest.IsolateEnv(t)
	fake := awsfake.NewSeeded("us-east-1")
	srv := fake.Start()
	defer srv.Close()
	e := EC2Config{AccessConfig: awsaccess.AccessConfig{AccessKey: "AKIAFAKE", SecretKey: "fake", CustomEndpointEC2: srv.URL, SkipMetadataAPICheck: true}}
	if errs := e.prepare(); len(errs) > 0 {
		t.Fatal(errs)
	}
	d := e.describer(map[string]interface{}{"BuildRegion": "us-east-1"})
	ctx := context.Background()
	p5, err := d(ctx, "p5.48xlarge")
	if err != nil || p5.GPUCount != 8 || p5.GPUMemoryMiB != 81920 || !p5.NVMe || p5.StorageGB != 30400 || !p5.Supports("x86_64") || p5.Refuse("instance_type") != nil {
		t.Fatalf("p5.48xlarge = %+v, %v", p5, err)
	}
	if g5g, err := d(ctx, "g5g.xlarge"); err != nil || g5g.NVMe || !g5g.Supports("aarch64") {
		t.Errorf("g5g.xlarge = %+v, %v: want arm64 without instance store", g5g, err)
	}
	if g6f, err := d(ctx, "g6f.large"); err != nil || !g6f.Fractional() || g6f.Refuse("instance_type") == nil {
		t.Errorf("g6f.large = %+v, %v: want a fractional type, refused", g6f, err)
	}
	fake.SetFault(awsfake.OpDescribeInstanceTypes, "", awsfake.Fault{AccessDenied: true})
	if _, err := d(ctx, "p5.48xlarge"); !errors.Is(err, instancetype.ErrDenied) {
		t.Errorf("denied: %v, want ErrDenied", err)
	}
}

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/instancetype"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// b200 is EC2's p6-b200.48xlarge answer as the fake EC2 gives it (test/awsfake).
func b200(gpus int) instancetype.Description {
	return instancetype.Description{InstanceType: "p6-b200.48xlarge", Architectures: []string{"x86_64"}, GPUName: "B200", GPUManufacturer: "NVIDIA",
		GPUCount: gpus, GPUMemoryMiB: 183359, NVMe: true, MaxEFA: 8}
}

// A bake reads DescribeInstanceTypes once, judges the host's type against it before any layer
// runs (architecture, fractional GPUs), and its checks say which figures came from it.
func TestBakeJudgesTheInstanceTypeFromEC2(t *testing.T) {
	denied := fmt.Errorf("%w for p6-b200.48xlarge: UnauthorizedOperation", instancetype.ErrDenied)
	for _, tc := range []struct {
		name       string
		desc       instancetype.Description
		err        error
		arch       string
		runErr     []string // "" = the bake passes
		layerRuns  bool
		statuses   map[string]result.Status
		mentioning map[string]string
	}{
		{name: "EC2 agrees", desc: b200(8), arch: "x86_64", layerRuns: true,
			statuses:   map[string]result.Status{result.InstanceType: result.Pass, result.GPU: result.Pass, result.NVMe: result.Pass},
			mentioning: map[string]string{result.GPU: "from DescribeInstanceTypes"}},
		{name: "arm64 AMI on an x86_64 type", desc: b200(8), arch: "arm64",
			runErr: []string{"before any layer", "the AMI (expect.architecture) is arm64 but p6-b200.48xlarge runs only x86_64", "instance_type", "the data source's architecture"}},
		{name: "fractional type", desc: instancetype.Description{InstanceType: "p6-b200.48xlarge", Architectures: []string{"x86_64"}, GPUName: "B200", GPUManufacturer: "NVIDIA", PartitionSize: 0.5},
			runErr: []string{`instance_type = "p6-b200.48xlarge"`, "0.5 of one GPU"}},
		{name: "EC2 says one GPU more", desc: b200(9), layerRuns: true, runErr: []string{"validation failed"},
			statuses:   map[string]result.Status{result.GPU: result.Fail},
			mentioning: map[string]string{result.GPU: "DescribeInstanceTypes says p6-b200.48xlarge has 9 GPUs but the PCI bus has 8"}},
		{name: "denied", err: denied, layerRuns: true,
			statuses:   map[string]result.Status{result.InstanceType: result.Warn, result.GPU: result.Pass},
			mentioning: map[string]string{result.InstanceType: "ec2:DescribeInstanceTypes denied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			ran := false
			h.layerHook[0] = func(context.Context, *fakeHost) (int, error) { ran = true; return 0, nil }
			opt := options(t, layer.Spec{Name: "tools", Inline: []string{"true"}})
			opt.Checks.Expect.Architecture = tc.arch
			calls := 0
			opt.DescribeType = func(_ context.Context, typ string) (instancetype.Description, error) {
				calls++
				if typ != "p6-b200.48xlarge" {
					t.Errorf("described %q", typ)
				}
				return tc.desc, tc.err
			}
			err := Run(context.Background(), h, &recordingUI{}, opt)
			if calls != 1 {
				t.Errorf("DescribeInstanceTypes read %d times, want once", calls)
			}
			if ran != tc.layerRuns {
				t.Errorf("layer ran = %v, want %v", ran, tc.layerRuns)
			}
			switch {
			case len(tc.runErr) == 0 && err != nil:
				t.Fatalf("bake failed: %v", err)
			case len(tc.runErr) > 0 && err == nil:
				t.Fatal("bake passed")
			}
			for _, s := range tc.runErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if tc.statuses == nil {
				return
			}
			data, rerr := os.ReadFile(filepath.Join(opt.ReportDir, report.JSONFile))
			if rerr != nil {
				t.Fatal(rerr)
			}
			var r report.Report
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			for id, want := range tc.statuses {
				c, ok := result.Find(r.Checks, id)
				if !ok || c.Status != want {
					t.Errorf("%s = %s, want %s: %s", id, c.Status, want, c.Message)
				}
				if m := tc.mentioning[id]; m != "" && !strings.Contains(c.Basis+" "+c.Expected+" "+c.Message, m) {
					t.Errorf("%s (%s | %s | %s) lacks %q", id, c.Basis, c.Expected, c.Message, m)
				}
			}
		})
	}
}

package dlami

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheckbin"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
)

func TestNodeCheckDefaults(t *testing.T) {
	var p Provisioner
	err := p.Prepare(map[string]interface{}{"node_check": map[string]interface{}{}})
	if nodecheckbin.Available() != nil {
		if err == nil || !strings.Contains(err.Error(), "node_check: this plugin was built without the dlami-node-check binary") || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("a plugin without the binaries: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	c := p.opt.NodeCheck
	if c == nil || c.Action != "block" || strings.Join(c.Before, " ") != "slurmd.service kubelet.service" || c.Timeout != 300*time.Second ||
		c.NCCL || c.Textfile != nodeconf.DefaultTextfile || c.BOMPath != "/etc/dlami-bake/manifest.json" || c.CheckTimeout != time.Minute {
		t.Errorf("defaults: %+v", c)
	}
	var off Provisioner
	if err := off.Prepare(map[string]interface{}{}); err != nil || off.opt.NodeCheck != nil {
		t.Errorf("without the block: %v, %+v", err, off.opt.NodeCheck)
	}
}

func TestNodeCheckSettings(t *testing.T) {
	var p Provisioner
	err := p.Prepare(map[string]interface{}{
		"validate": false,
		"node_check": map[string]interface{}{
			"action": "explode", "before": []string{"slurmd.service; reboot"}, "timeout": "1s", "textfile": "/tmp/x.txt",
		},
	})
	for _, want := range []string{
		`node_check.action "explode": use block, drain, report`,
		`node_check.before[0] "slurmd.service; reboot": not a systemd unit name`,
		"node_check.timeout 1s: use 10s to 1h",
		`node_check.textfile "/tmp/x.txt"`,
		"node_check needs the bill of materials, which validate = false does not write",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Prepare: %v\nwant %q", err, want)
		}
	}
	var q Provisioner
	err = q.Prepare(map[string]interface{}{"node_check": map[string]interface{}{"action": "drain", "before": []string{"slurmd.service"}, "timeout": "90s", "textfile": "none", "nccl": true}})
	if nodecheckbin.Available() != nil {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if c := q.opt.NodeCheck; c.Action != "drain" || c.TextfilePath() != "" || !c.NCCL || c.Timeout != 90*time.Second {
		t.Errorf("settings: %+v", c)
	}
	if u := nodeconf.Unit(*q.opt.NodeCheck); strings.Contains(u, "RequiredBy") || !strings.Contains(u, "Before=slurmd.service\n") {
		t.Errorf("drain unit:\n%s", u)
	}
}

// The fleet settings: refused with the setting's name, the one combination that would fight
// refused naming both, and what is accepted reaches the command's config resolved (the
// defaults filled in, as the command fills them in a config without them).
func TestNodeCheckFleetSettings(t *testing.T) {
	var p Provisioner
	err := p.Prepare(map[string]interface{}{"node_check": map[string]interface{}{
		"replace": "asg", "npd_condition": "AcceleratedHardwareReady",
	}})
	if err == nil || !strings.Contains(err.Error(), `node_check.replace = "asg" together with node_check.npd_condition = "AcceleratedHardwareReady": two owners would replace the same node`) {
		t.Errorf("two owners: %v", err)
	}
	// AcceleratedHardwareReady with a bound that could outlast half of node repair's toleration:
	// node-problem-detector reports False until the first run answers.
	var pt Provisioner
	err = pt.Prepare(map[string]interface{}{"node_check": map[string]interface{}{
		"npd_condition": "AcceleratedHardwareReady", "timeout": "15m",
	}})
	if err == nil || !strings.Contains(err.Error(), `node_check.timeout 15m0s together with node_check.npd_condition = "AcceleratedHardwareReady"`) || !strings.Contains(err.Error(), "set node_check.timeout to at most 5m0s") {
		t.Errorf("AcceleratedHardwareReady with a 15m bound: %v", err)
	}
	var p2 Provisioner
	err = p2.Prepare(map[string]interface{}{"node_check": map[string]interface{}{
		"replace":  "karpenter",
		"evidence": map[string]interface{}{"s3_uri": "bucket/prefix", "dcgm_level": 9, "max_size_mb": -1},
	}})
	for _, want := range []string{`node_check.replace "karpenter": use none, asg`, "node_check.evidence.max_size_mb -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Prepare: %v\nwant %q", err, want)
		}
	}
	var p3 Provisioner
	err = p3.Prepare(map[string]interface{}{"node_check": map[string]interface{}{
		"evidence": map[string]interface{}{"s3_uri": "bucket/prefix", "dcgm_level": 9},
	}})
	for _, want := range []string{`node_check.evidence.s3_uri: "bucket/prefix" does not start with s3://`, "node_check.evidence.dcgm_level = 9"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Prepare: %v\nwant %q", err, want)
		}
	}
	var q Provisioner
	err = q.Prepare(map[string]interface{}{"node_check": map[string]interface{}{
		"replace":  "asg",
		"evidence": map[string]interface{}{"s3_uri": "s3://gpu-evidence/fleet", "dcgm_level": 3, "max_size_mb": 256, "max_bundles": 4, "bug_report_timeout": "5m"},
	}})
	if nodecheckbin.Available() != nil {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	c := q.opt.NodeCheck
	want := nodeconf.Evidence{S3URI: "s3://gpu-evidence/fleet", DCGMLevel: 3, MaxSizeMB: 256, MaxBundles: 4, BugReportTimeout: 5 * time.Minute, Dir: nodeconf.DefaultEvidenceDir}
	if c.Replace != "asg" || c.Evidence != want {
		t.Errorf("config: replace %q, evidence %+v", c.Replace, c.Evidence)
	}
	// The unit waits for the bundle too: 5m run + 20s + 5m bug report + 1h DCGM + 30s.
	if u := nodeconf.Unit(*c); !strings.Contains(u, "TimeoutStartSec=4250\n") {
		t.Errorf("unit:\n%s", u)
	}
}

// The file the bake installs is what the command reads back, unchanged, and the command's
// validation (the same rule) accepts it in every mode.
func TestNodeCheckFileReadsBackInTheCommand(t *testing.T) {
	var p Provisioner
	err := p.Prepare(map[string]interface{}{"check_timeout": "45s", "manifest_path": "/etc/golden/manifest.json", "node_check": map[string]interface{}{
		"action": "drain", "before": []string{"slurmd.service"}, "timeout": "4m", "nccl": true, "dcgm_level": 1, "textfile": "none",
		"skip_checks": []string{"nvme"}, "npd_condition": "AcceleratedHardwareReady",
		"evidence": map[string]interface{}{"max_size_mb": 64, "bug_report_timeout": "2m", "disable": true},
	}})
	if nodecheckbin.Available() != nil {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	installed := *p.opt.NodeCheck
	back, err := nodeconf.DecodeConfig(installed.Encode())
	if err != nil || !reflect.DeepEqual(back, installed) {
		t.Fatalf("read back %+v, %v\nwant %+v", back, err, installed)
	}
	if back.BOMPath != "/etc/golden/manifest.json" || back.CheckTimeout != 45*time.Second || back.Evidence.MaxBytes() != 64<<20 || !back.Evidence.Disable {
		t.Errorf("the file: %+v", back)
	}
	if !reflect.DeepEqual(back.Resolved(), back) {
		t.Errorf("the command would resolve the file differently: %+v", back.Resolved())
	}
	for _, mode := range nodeconf.Modes {
		if err := (nodecheck.Options{Config: back.Resolved(), Mode: mode}).Validate(); err != nil {
			t.Errorf("mode %s refuses the installed file: %v", mode, err)
		}
	}
}
